"""Domain adaptation: ADDA's adversarial step (a critic between source and target features, the
target encoder trained to fool it) and DANN's gradient reversal layer.

The text is ours, at tiny sizes; the structure is the source's.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- corenel/pytorch-adda core/adapt.py@0f98f5de673d0842f484a6460f2367131c243aad (train_tgt):
# the critic is trained on torch.cat(feat_src, feat_tgt).detach() with labels source 1,
# target 0 by optimizer_critic; then the target encoder is trained by optimizer_tgt to make the
# critic say 1 on target features (through the critic, which that optimizer does not step).
ADDA = "corenel/pytorch-adda core/adapt.py@0f98f5de673d0842f484a6460f2367131c243aad"
ADDA_URL = ("https://github.com/corenel/pytorch-adda/blob/0f98f5de673d0842f484a6460f2367131c243aa"
            "d/core/adapt.py")


# The bug: the critic's input is not detached: its loss fills the target encoder's (and the
# frozen-by-intent source encoder's) gradients (truth "leaks").
def adda(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    src_encoder = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 4))
    tgt_encoder = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 4))
    tgt_encoder.load_state_dict(src_encoder.state_dict())
    critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt_tgt = torch.optim.Adam(tgt_encoder.parameters(), lr=1e-4, betas=(0.5, 0.999))
    opt_critic = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.999))

    def step() -> dict[str, torch.Tensor]:
        images_src = torch.randn(4, 5, generator=gen)
        images_tgt = torch.randn(4, 5, generator=gen) + 0.5
        feat_src = src_encoder(images_src)
        feat_tgt = tgt_encoder(images_tgt)
        feat_concat = torch.cat((feat_src, feat_tgt), 0)
        pred_concat = critic(feat_concat if bug else feat_concat.detach())
        label_concat = torch.cat((torch.ones(4, dtype=torch.long),
                                  torch.zeros(4, dtype=torch.long)))
        loss_critic = F.cross_entropy(pred_concat, label_concat)
        pred_tgt = critic(tgt_encoder(images_tgt))
        loss_tgt = F.cross_entropy(pred_tgt, torch.ones(4, dtype=torch.long))
        return {"critic": loss_critic, "tgt": loss_tgt}

    return RealCase("adda_critic_no_detach" if bug else "adda", ADDA, ADDA_URL,
                    "leaks" if bug else "correct", step, {"critic": opt_critic, "tgt": opt_tgt},
                    {"src_encoder": src_encoder, "tgt_encoder": tgt_encoder, "critic": critic},
                    expect_pass_through=True)


# --- fungtion/DANN models/model.py@691672b90bf6071776b522bca2febba8b50edf90 and train/main.py@
# 55fecec97adcbaff15e3ed4bc33786cfdf4dae37: one network, a feature extractor feeding a class
# classifier and, through ReverseLayerF (identity forward, gradient times -alpha backward), a
# domain classifier; one Adam over all of it; loss = class + source domain + target domain.
# Here the reversal is written without an autograd.Function, as (1 + a) x.detach() - a x: the
# value is x, the derivative -a. Correct, though it reads like a cut (a false-alarm trap).
DANN = "fungtion/DANN models/model.py@691672b90bf6071776b522bca2febba8b50edf90"
DANN_URL = ("https://github.com/fungtion/DANN/blob/691672b90bf6071776b522bca2febba8b50edf90/"
            "models/model.py")


def dann_reversal(seed: int) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    feature = nn.Sequential(nn.Linear(5, 6), nn.ReLU())
    class_classifier = nn.Linear(6, 3)
    domain_classifier = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
    modules = {"feature": feature, "class_classifier": class_classifier,
               "domain_classifier": domain_classifier}
    optimizer = torch.optim.Adam([p for m in modules.values() for p in m.parameters()], lr=1e-3)
    alpha = 0.3

    def reverse(x: torch.Tensor) -> torch.Tensor:
        return (1 + alpha) * x.detach() - alpha * x

    def step() -> torch.Tensor:
        source = torch.randn(4, 5, generator=gen)
        labels = torch.randint(0, 3, (4,), generator=gen)
        target = torch.randn(4, 5, generator=gen) + 1.0
        f_src, f_tgt = feature(source), feature(target)
        err_class = F.cross_entropy(class_classifier(f_src), labels)
        err_s = F.cross_entropy(domain_classifier(reverse(f_src)), torch.zeros(4, dtype=torch.long))
        err_t = F.cross_entropy(domain_classifier(reverse(f_tgt)), torch.ones(4, dtype=torch.long))
        return err_class + err_s + err_t

    return RealCase("dann_reversal_by_detach", DANN, DANN_URL, "correct", step, optimizer, modules)


CASES = {"adda": adda, "adda_critic_no_detach": lambda seed: adda(seed, bug=True),
         "dann_reversal_by_detach": dann_reversal}
TWINS = {"adda_critic_no_detach": "adda"}
FIELD = "domain adaptation"
