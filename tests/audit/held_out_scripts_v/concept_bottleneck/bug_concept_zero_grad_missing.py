"""Sequential concept bottleneck model on a tiny synthetic data set with binary concepts, written
after Koh, Nguyen, Tang, Mussmann, Pierson, Kim and Liang, "Concept Bottleneck Models" (ICML 2020,
arXiv:2007.04612): the model first predicts human-interpretable concepts c_hat = g(x) and then the
label from the concepts alone, y_hat = f(c_hat). Of the paper's training modes this is the
sequential bottleneck: phase 1 learns g by minimising the concept loss sum_j L_Cj(g_j(x), c_j)
only; phase 2 freezes g and learns f by minimising the label loss L_Y(f(g(x)), y) on the concepts
that g predicts, so the label loss never reaches g (in the joint mode, which the paper compares
against, f and g are trained together on L_Y + lambda * sum_j L_Cj). With the authors' code,
yewsiang/ConceptBottleneck (https://github.com/yewsiang/ConceptBottleneck, CUB/train.py:
train_X_to_C builds the concept model ModelXtoC and train() runs run_epoch with bottleneck set,
a BCEWithLogitsLoss (or cross-entropy) per attribute summed and divided by n_attributes, then
optimizer.zero_grad(), total_loss.backward(), optimizer.step() with the optimizer built over
filter(lambda p: p.requires_grad, model.parameters()); the Sequential_CtoY experiment trains
ModelXtoChat_ChatToY, the C -> Y MLP of CUB/template_model.py, with run_epoch_simple and a
cross-entropy loss on the concepts that generate_new_data.py's create_logits_data / inference
computed with the trained X -> C model in eval mode, as data without gradient, sigmoid applied
when use_sigmoid is set, as End2EndModel.forward_stage2 does for the joint model), whose steps
this script follows, both phases in one script, the label model reading the frozen concept
model's predictions on the fly; synthetic 16-D inputs, 8 binary concepts and 5 classes.
Bug: concept_optimizer.zero_grad() is missing from the phase-1 loop, so the concept model's
gradients pile up over the steps and Adam steps on their running sum from the second update
on; phase 2 then fits the label model to the concepts of that badly trained concept model."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--concept-steps", type=int, default=120)
parser.add_argument("--label-steps", type=int, default=120)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--weight-decay", type=float, default=5e-5)
parser.add_argument("--out", default=None, help="where to save the concept and label models")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, x_dim, n_concepts, n_classes, hidden = 512, 16, 8, 5, 32

# synthetic data: concepts are noisy thresholded projections of x, the label depends on c only
x_all = torch.randn(n, x_dim)
concept_proj = torch.randn(x_dim, n_concepts)
c_all = (x_all @ concept_proj + 0.3 * torch.randn(n, n_concepts) > 0).float()
class_proj = torch.randn(n_concepts, n_classes)
y_all = (c_all @ class_proj + 0.1 * torch.randn(n, n_classes)).argmax(1)


class End2EndModel(nn.Module):
    """x -> concept logits (first_model) -> sigmoid -> label logits (sec_model)."""

    def __init__(self, first_model, sec_model):
        super().__init__()
        self.first_model = first_model
        self.sec_model = sec_model

    def forward(self, x):
        concept_logits = self.first_model(x)
        label_logits = self.sec_model(torch.sigmoid(concept_logits))
        return label_logits, concept_logits


concept_model = nn.Sequential(nn.Linear(x_dim, hidden), nn.ReLU(), nn.Linear(hidden, n_concepts))
label_model = nn.Sequential(nn.Linear(n_concepts, 16), nn.ReLU(), nn.Linear(16, n_classes))
cbm = End2EndModel(concept_model, label_model)

# phase 1 (Concept_XtoC): the concept model alone, on the concept labels
concept_optimizer = torch.optim.Adam(cbm.first_model.parameters(), lr=args.lr,
                                     weight_decay=args.weight_decay)
for step in range(args.concept_steps):
    idx = torch.randint(0, n, (args.batch_size,))
    concept_logits = cbm.first_model(x_all[idx])
    concept_loss = F.binary_cross_entropy_with_logits(concept_logits, c_all[idx])
    concept_loss.backward()
    concept_optimizer.step()
    if step % 50 == 0:
        concept_acc = ((concept_logits > 0).float() == c_all[idx]).float().mean().item()
        print(f"concept {step} loss {concept_loss.item():.4f} acc {concept_acc:.3f}")

# phase 2 (Sequential_CtoY): freeze the concept model, train the label model on its predictions
cbm.first_model.requires_grad_(False)
cbm.first_model.eval()
label_optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, cbm.parameters()),
                                   lr=args.lr, weight_decay=args.weight_decay)
for step in range(args.label_steps):
    idx = torch.randint(0, n, (args.batch_size,))
    label_logits, _ = cbm(x_all[idx])
    label_loss = F.cross_entropy(label_logits, y_all[idx])
    label_optimizer.zero_grad()
    label_loss.backward()
    label_optimizer.step()
    if step % 50 == 0:
        label_acc = (label_logits.argmax(1) == y_all[idx]).float().mean().item()
        print(f"label {step} loss {label_loss.item():.4f} acc {label_acc:.3f}")

if args.out:
    torch.save({"concept_model": cbm.first_model.state_dict(),
                "label_model": cbm.sec_model.state_dict()}, args.out)
