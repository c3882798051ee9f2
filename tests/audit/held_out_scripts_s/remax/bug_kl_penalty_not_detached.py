"""ReMax, REINFORCE with the greedy response's reward as the baseline, of a tiny autoregressive
policy against a learned reward model, written after Li, Xu, Zhang, Liu, Sun and Luo, "ReMax: A
Simple, Effective, and Efficient Reinforcement Learning Method for Aligning Large Language
Models" (ICML 2024, arXiv:2310.10505): for each prompt the policy samples a response and also
decodes one greedily, both are scored by the frozen reward model, and the policy gradient is
that of REINFORCE, sum_t grad log pi(a_t | x, a_<t) * (r(x, a) - r(x, a_greedy)), the greedy
reward a per-prompt baseline that needs no value network; a per-token KL penalty to the frozen
reference (the initial policy) is added to the return. Two phases: the reward model is trained
first on preference pairs with the Bradley-Terry loss and then frozen, then ReMax trains the
policy. With the authors' code, liziniu/ReMax (https://github.com/liziniu/ReMax,
utils/model/reward_model.py RewardModel.forward: loss -logsigmoid(chosen_reward -
rejected_reward) averaged over the pairs; step3_rlhf_finetuning/rlhf_engine.py
DeepSpeedRLHFEngine: the actor with its optimizer, the ref and the reward engines built with
eval configs and no optimizer; step3_rlhf_finetuning/remax_trainer.py DeepSpeedReMaxTrainer:
generate_experience samples seq and decodes baseline_seq with do_sample=False under
torch.no_grad(), runs the actor on seq with gradient and, under torch.no_grad(), the reference
and reward_model.forward_value on seq and on baseline_seq (rewards and baseline_rewards, each
.detach()ed); compute_loss, under torch.no_grad(), takes kl_divergence = -kl_ctl * (log_probs -
ref_log_probs) and reward_score - baseline_reward_score and builds the returns of
compute_returns, the per-token KL term plus the clipped reward difference at every response
token (with gamma 1); actor_loss_fn = sum(-returns * logprobs * mask) / mask.sum(); main.py calls
backward on the actor engine and steps it). Here the reference and the reward model are frozen
with requires_grad_(False), so that their outputs carry no graph without torch.no_grad(), which
gives the same values and gradients; the KL term is detached where it is made; the trainable
parameters are gathered from the engine with the p.requires_grad filter that utils/utils.py
get_optimizer_grouped_parameters applies to the actor; responses are sampled from the full
softmax (no top_p); the reward model scores a mean over per-token features of the response in
place of the end token's hidden state; the initial policy stands in for the SFT model of
ReMax's first step. The prompts are integers, the responses four tokens, the true preference
counts the tokens that follow the prompt's pattern, and both networks are small MLPs over the
prompt, a token and the position.
Bug: the per-token KL penalty keeps the actor's graph, kl_penalty = -kl_coef * (logps -
ref_logps) with no .detach(), where liziniu/ReMax's DeepSpeedReMaxTrainer.compute_loss builds
kl_divergence and the returns under torch.no_grad(), so that the returns are fixed weights of
the log-likelihood: the loss -(returns * logps).mean() then also differentiates through the
returns, adding kl_coef times the gradient of mean(logps ** 2) / 2, a term that is no part of
the REINFORCE estimator: it raises every sampled token's log-probability with weight kl_coef *
(-log pi), a likelihood term on the policy's own samples that sharpens the policy and works
against the KL penalty that was meant to hold it near the reference, from the first update on."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--reward-steps", type=int, default=100)
parser.add_argument("--remax-steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--kl-coef", type=float, default=0.1, help="kl_ctl of the reference code")
parser.add_argument("--clip-reward", type=float, default=5.0)
parser.add_argument("--out", default=None, help="where to save the actor, reference and reward")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_prompts, vocab, length, hidden = 8, 6, 4, 32
bos = vocab


def true_reward(prompts, responses):
    pattern = (prompts.unsqueeze(1) + 2 * torch.arange(length)) % vocab
    return (responses == pattern).float().sum(1)


# preference pairs for the reward model: noisy copies of the pattern, labelled by the true
# reward with logistic noise
n_pairs = 512
pair_prompts = torch.randint(0, n_prompts, (n_pairs,))
pair_pattern = (pair_prompts.unsqueeze(1) + 2 * torch.arange(length)) % vocab
responses_a, responses_b = (
    torch.where(torch.rand(n_pairs, length) < 0.6, torch.randint(0, vocab, (n_pairs, length)),
                pair_pattern) for _ in range(2))
noise = torch.logit(torch.rand(n_pairs).clamp(1e-4, 1 - 1e-4))
a_wins = (true_reward(pair_prompts, responses_a) - true_reward(pair_prompts, responses_b)
          + 0.5 * noise > 0).unsqueeze(1)
pair_chosen = torch.where(a_wins, responses_a, responses_b)
pair_rejected = torch.where(a_wins, responses_b, responses_a)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.prompt_embed = nn.Embedding(n_prompts, hidden)
        self.token_embed = nn.Embedding(vocab + 1, hidden)
        self.position_embed = nn.Embedding(length, hidden)
        self.mlp = nn.Sequential(nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, vocab))

    def forward(self, prompts, tokens):
        """Teacher-forced logits of every response token (B x length x vocab)."""
        previous = torch.cat([torch.full_like(tokens[:, :1], bos), tokens[:, :-1]], 1)
        h = (self.prompt_embed(prompts).unsqueeze(1) + self.token_embed(previous)
             + self.position_embed.weight)
        return self.mlp(h)


class RewardModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.prompt_embed = nn.Embedding(n_prompts, hidden)
        self.token_embed = nn.Embedding(vocab, hidden)
        self.position_embed = nn.Embedding(length, hidden)
        self.body = nn.Sequential(nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.v_head = nn.Linear(hidden, 1)

    def forward(self, prompts, responses):
        h = (self.prompt_embed(prompts).unsqueeze(1) + self.token_embed(responses)
             + self.position_embed.weight)
        return self.v_head(self.body(h).mean(1)).squeeze(1)


def token_logps(model, prompts, responses):
    """Log-probabilities of the response tokens (B x length)."""
    logp = model(prompts, responses).log_softmax(-1)
    return logp.gather(2, responses.unsqueeze(2)).squeeze(2)


@torch.no_grad()
def generate(model, prompts, greedy):
    responses = torch.zeros(len(prompts), length, dtype=torch.long)
    for t in range(length):
        logits = model(prompts, responses)[:, t]
        if greedy:
            responses[:, t] = logits.argmax(-1)
        else:
            responses[:, t] = torch.multinomial(logits.softmax(-1), 1).squeeze(1)
    return responses


# phase 1: the reward model on the preference pairs (Bradley-Terry)
reward_model = RewardModel()
reward_optimizer = torch.optim.Adam(reward_model.parameters(), lr=1e-2)
for step in range(args.reward_steps):
    idx = torch.randint(0, n_pairs, (64,))
    chosen_scores = reward_model(pair_prompts[idx], pair_chosen[idx])
    rejected_scores = reward_model(pair_prompts[idx], pair_rejected[idx])
    reward_loss = -F.logsigmoid(chosen_scores - rejected_scores).mean()
    reward_optimizer.zero_grad()
    reward_loss.backward()
    reward_optimizer.step()
    if step % 50 == 0:
        accuracy = (chosen_scores > rejected_scores).float().mean().item()
        print(f"reward {step} loss {reward_loss.item():.4f} accuracy {accuracy:.2f}")

# phase 2: ReMax, with the reward model and the initial policy frozen
actor = Policy()
reward_model.eval().requires_grad_(False)
ref_model = copy.deepcopy(actor).eval().requires_grad_(False)
rlhf_engine = nn.ModuleDict({"actor": actor, "ref": ref_model, "reward": reward_model})
optimizer = torch.optim.Adam([p for p in rlhf_engine.parameters() if p.requires_grad], lr=1e-2,
                             betas=(0.9, 0.95))
for step in range(args.remax_steps):
    prompts = torch.randint(0, n_prompts, (args.batch_size,))
    responses = generate(actor, prompts, greedy=False)
    greedy_responses = generate(actor, prompts, greedy=True)
    rewards = reward_model(prompts, responses)
    baseline_rewards = reward_model(prompts, greedy_responses)
    logps = token_logps(actor, prompts, responses)
    ref_logps = token_logps(ref_model, prompts, responses)
    kl_penalty = -args.kl_coef * (logps - ref_logps)
    advantages = (rewards - baseline_rewards).clamp(-args.clip_reward, args.clip_reward)
    returns = kl_penalty + advantages.unsqueeze(1)
    actor_loss = -(returns * logps).mean()
    optimizer.zero_grad()
    actor_loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"remax {step} loss {actor_loss.item():.4f}"
              f" true reward {true_reward(prompts, responses).mean().item():.3f}"
              f" greedy {true_reward(prompts, greedy_responses).mean().item():.3f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "ref_model": ref_model.state_dict(),
                "reward_model": reward_model.state_dict()}, args.out)
