"""SPIN (self-play fine-tuning) of a tiny GRU language model on synthetic sequences.

Paper: Zixiang Chen, Yihe Deng, Huizhuo Yuan, Kaixuan Ji, Quanquan Gu, "Self-Play Fine-Tuning
Converts Weak Language Models to Strong Language Models", ICML 2024, arXiv:2401.01335.
Reference implementation: uclaml/SPIN, spin/alignment/trainer.py (SPINTrainer.spin_loss,
SPINTrainer.concatenated_forward, SPINTrainer.get_batch_metrics), with spin/generate.py making
the synthetic responses and one fresh training run per iteration.

Prompts are two tokens; a "human" response is five tokens following a noisy arithmetic rule
of the prompt. A GRU language model is first fine-tuned briefly by maximum likelihood (SFT) on
the real responses. Then each SPIN iteration freezes a deep copy of the current model as the
opponent, samples one synthetic response per prompt from it without gradient, and trains the
model with a fresh optimizer on the logistic loss
    -log sigmoid(beta * [(log p(y_real) - log p(y_synth)) - (log q(y_real) - log q(y_synth))])
where p is the model and q the opponent. The opponent's log-likelihoods are computed under
torch.no_grad(), so the loss reaches only the model, through both its real and its synthetic
log-likelihood. At the next iteration the opponent is replaced by a copy of the new model.
Bug: the model's log-likelihood of the synthetic responses is computed inside the
torch.no_grad() block with the opponent's, so the loss only raises the real responses'
likelihood and never pushes the synthetic ones down.
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, P_LEN, R_LEN = 10, 2, 5


class TinyLM(nn.Module):
    def __init__(self, vocab=VOCAB, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, d, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        h, _ = self.gru(self.emb(tokens))
        return self.head(h)


def response_logp(model, prompts, responses):
    seq = torch.cat([prompts, responses], dim=1)
    logits = model(seq[:, :-1])[:, P_LEN - 1:]
    logp = logits.log_softmax(-1).gather(-1, responses.unsqueeze(-1)).squeeze(-1)
    return logp.sum(-1)


@torch.no_grad()
def generate(model, prompts):
    seq = prompts
    for _ in range(R_LEN):
        probs = model(seq)[:, -1].softmax(-1)
        seq = torch.cat([seq, torch.multinomial(probs, 1)], dim=1)
    return seq[:, P_LEN:]


def make_data(n):
    prompts = torch.randint(1, VOCAB, (n, P_LEN))
    steps = torch.arange(1, R_LEN + 1)
    responses = (prompts[:, :1] + steps * prompts[:, 1:]) % VOCAB
    noise = torch.rand(n, R_LEN) < 0.1
    responses = torch.where(noise, torch.randint(0, VOCAB, (n, R_LEN)), responses)
    return prompts, responses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    parser.add_argument("--sft_steps", type=int, default=100)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--spin_steps", type=int, default=25)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--beta", type=float, default=0.1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    prompts, real = make_data(512)
    model = TinyLM()

    # SFT on the real responses
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(args.sft_steps):
        idx = torch.randint(0, prompts.shape[0], (args.batch,))
        loss = -response_logp(model, prompts[idx], real[idx]).mean() / R_LEN
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 0 or step == args.sft_steps - 1:
            print(f"sft step {step:3d} nll {loss.item():.4f}")

    for it in range(args.iters):
        opponent = copy.deepcopy(model).eval()
        synth = generate(opponent, prompts)
        opt = torch.optim.RMSprop(model.parameters(), lr=5e-4)
        for step in range(args.spin_steps):
            idx = torch.randint(0, prompts.shape[0], (args.batch,))
            pr, y_real, y_synth = prompts[idx], real[idx], synth[idx]
            with torch.no_grad():
                opp_real = response_logp(opponent, pr, y_real)
                opp_synth = response_logp(opponent, pr, y_synth)
                pol_synth = response_logp(model, pr, y_synth)
            pol_real = response_logp(model, pr, y_real)
            logits = (pol_real - pol_synth) - (opp_real - opp_synth)
            loss = -F.logsigmoid(args.beta * logits).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0 or step == args.spin_steps - 1:
                print(f"spin iter {it} step {step:3d} loss {loss.item():.4f} "
                      f"real {pol_real.mean().item():.3f} synth {pol_synth.mean().item():.3f}")

    if args.out:
        torch.save({"model": model.state_dict(), "opponent": opponent.state_dict()}, args.out)


if __name__ == "__main__":
    main()
