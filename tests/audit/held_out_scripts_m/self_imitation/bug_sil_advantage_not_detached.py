"""Self-imitation learning at a tiny size, written after Oh, Guo, Singh and Lee, "Self-Imitation
Learning" (ICML 2018, arXiv:1806.05635), section 3 and algorithm 1: an A2C learner whose past
episodes with a positive reward are kept with their discounted returns R in a replay buffer, and
after each A2C update a few self-imitation updates on replayed (s, a, R) with the policy term
-log pi(a|s) (R - V(s))+, the clipped advantage held without gradient, and the value term
1/2 ||(R - V(s))+||^2 that regresses V towards R where the past return was better, with
junhyukoh/self-imitation-learning (https://github.com/junhyukoh/self-imitation-learning,
baselines/common/self_imitation.py SelfImitation.build_loss_op: self.adv =
tf.stop_gradient(tf.clip_by_value(self.R - model_vf, 0.0, self.clip)), the mask of R > V, the
entropy and the losses summed over num_samples = max(valid samples, min_batch_size);
update_buffer, which keeps an episode only if one of its rewards is positive; add_episode with
discount_with_dones; baselines/a2c/a2c_sil.py Model, one RMSProp trainer for the A2C loss and for
the self-imitation loss, both with gradients clipped by global norm) and its PyTorch port
TianhongDai/self-imitation-learning-pytorch
(https://github.com/TianhongDai/self-imitation-learning-pytorch, sil_module.py
train_sil_model: advantages = (returns - value).detach(), torch.clamp(advantages, 0, clip), the
clipped negative log-probability, self.optimizer.zero_grad() before total_loss.backward();
a2c_agent.py _update_network with advantages.detach() in the action loss). The self-imitation
updates start once the buffer holds enough transitions, as the reference waits for 100; uniform
sampling stands in for the prioritised replay (sil_beta = 0 leaves its weights at 1). A chain
whose far end pays 1, made in the script. Injected bug: the clipped advantage of the
self-imitation loss is taken as (R - V(s)).clamp(0, clip) without .detach() (the reference wraps
it in tf.stop_gradient and the port detaches the advantages), so the policy term (R - V)+ * -log
pi(a|s) also differentiates V: on every replayed transition with 0 < R - V < clip it raises V(s)
with the weight -log pi(a|s), through the value head and the shared body, on top of the value
term that w_value = 0.01 keeps small, and the body is shaped by a value regression the method
does not make."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=20)
parser.add_argument("--n-env", type=int, default=4)
parser.add_argument("--n-steps", type=int, default=5)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=7e-3)
parser.add_argument("--ent-coef", type=float, default=0.01)
parser.add_argument("--vf-coef", type=float, default=0.5)
parser.add_argument("--max-grad-norm", type=float, default=0.5)
parser.add_argument("--sil-updates", type=int, default=2)
parser.add_argument("--sil-batch", type=int, default=16)
parser.add_argument("--sil-start", type=int, default=24, help="buffer size before SIL starts")
parser.add_argument("--sil-min-batch", type=int, default=8)
parser.add_argument("--clip", type=float, default=1.0)
parser.add_argument("--max-nlogp", type=float, default=5.0)
parser.add_argument("--w-value", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, time_limit, hidden_dim = 6, 2, 12, 32


def env_step(pos, t, action):
    """Left or right along a chain; the far end pays 1 and ends the episode."""
    pos = (pos + 2 * action - 1).clamp(0, n_states - 1)
    t = t + 1
    reward = (pos == n_states - 1).float()
    return pos, t, reward, (pos == n_states - 1) | (t >= time_limit)


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_states, hidden_dim), nn.Tanh())
        self.pi = nn.Linear(hidden_dim, n_actions)
        self.v = nn.Linear(hidden_dim, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.pi(h), self.v(h).squeeze(-1)


net = ActorCritic()
optimizer = torch.optim.RMSprop(net.parameters(), lr=args.lr, alpha=0.99, eps=1e-5)
buffer = {"obs": [], "act": [], "ret": []}
running = [[] for _ in range(args.n_env)]


def add_episode(episode):
    """Keep a finished episode with its discounted returns if one of its rewards is positive."""
    if not any(r > 0 for _, _, r in episode):
        return
    ret = 0.0
    for obs, act, r in reversed(episode):
        ret = r + args.gamma * ret
        buffer["obs"].append(obs)
        buffer["act"].append(act)
        buffer["ret"].append(torch.tensor(ret))


def a2c_update(obs, actions, returns):
    logits, values = net(obs)
    dist = Categorical(logits=logits)
    advantages = returns - values
    policy_loss = -(advantages.detach() * dist.log_prob(actions)).mean()
    value_loss = advantages.pow(2).mean()
    loss = policy_loss + args.vf_coef * value_loss - args.ent_coef * dist.entropy().mean()
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
    optimizer.step()
    return value_loss.item()


def sil_update():
    idx = torch.randint(0, len(buffer["obs"]), (args.sil_batch,)).tolist()
    obs = torch.stack([buffer["obs"][i] for i in idx])
    actions = torch.stack([buffer["act"][i] for i in idx])
    returns = torch.stack([buffer["ret"][i] for i in idx])
    logits, values = net(obs)
    dist = Categorical(logits=logits)
    clipped_nlogp = (-dist.log_prob(actions)).clamp(max=args.max_nlogp)
    advantages = returns - values
    mask = (advantages > 0).float()
    num_samples = max(mask.sum().item(), args.sil_min_batch)
    clipped_advantages = advantages.clamp(0, args.clip)
    policy_loss = (clipped_advantages * clipped_nlogp).sum() / num_samples
    entropy = (dist.entropy() * mask).sum() / num_samples
    value_loss = 0.5 * (advantages.clamp(min=0) ** 2).sum() / num_samples
    loss = policy_loss - args.ent_coef * entropy + args.w_value * value_loss
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
    optimizer.step()
    return mask.sum().item()


pos = torch.zeros(args.n_env, dtype=torch.long)
t = torch.zeros(args.n_env, dtype=torch.long)
for update in range(args.updates):
    mb_obs, mb_act, mb_rew, mb_done = [], [], [], []
    for step in range(args.n_steps):
        obs = F.one_hot(pos, n_states).float()
        with torch.no_grad():
            logits, _ = net(obs)
        action = Categorical(logits=logits).sample()
        pos, t, reward, done = env_step(pos, t, action)
        for i in range(args.n_env):
            running[i].append((obs[i], action[i], reward[i].item()))
            if done[i]:
                add_episode(running[i])
                running[i] = []
        mb_obs.append(obs), mb_act.append(action), mb_rew.append(reward), mb_done.append(done)
        pos, t = torch.where(done, 0, pos), torch.where(done, 0, t)
    with torch.no_grad():
        _, ret = net(F.one_hot(pos, n_states).float())
    mb_ret = []
    for reward, done in zip(reversed(mb_rew), reversed(mb_done)):
        ret = reward + args.gamma * ret * (1 - done.float())
        mb_ret.insert(0, ret)
    value_loss = a2c_update(torch.cat(mb_obs), torch.cat(mb_act), torch.cat(mb_ret))
    valid = 0.0
    if len(buffer["obs"]) >= args.sil_start:  # self-imitation once the buffer holds enough
        for _ in range(args.sil_updates):
            valid = sil_update()
    print(f"update {update} value loss {value_loss:.4f} buffer {len(buffer['obs'])} "
          f"sil valid {valid:.0f}")

if args.out:
    torch.save({k: v.detach().clone() for k, v in net.state_dict().items()}, args.out)
