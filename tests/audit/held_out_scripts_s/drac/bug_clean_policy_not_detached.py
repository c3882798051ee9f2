"""DrAC, data-regularized actor-critic, on a tiny synthetic corridor task, written after
Raileanu, Goldstein, Yarats, Kostrikov and Fergus, "Automatic Data Augmentation for
Generalization in Reinforcement Learning" (NeurIPS 2021, arXiv:2006.12862): PPO whose loss gets
two regularisers that make the policy and the value function invariant to an augmentation f of
the observation, G_pi = KL(pi(.|s) || pi(.|f(s))) and G_V = (V(f(s)) - V(s))^2, the policy and
the value at the clean observation s being held fixed (not differentiated), so that only the
augmented branch is pulled towards them; the loss is J_PPO - alpha_r * (G_pi + G_V). With the
authors' code rraileanu/auto-drac (https://github.com/rraileanu/auto-drac, train.py train:
actions, values and action log-probabilities of the rollout taken under torch.no_grad(), the
bootstrap value likewise, rollouts.compute_returns with GAE; ucb_rl2_meta/algo/drac.py
DrAC.update: normalised advantages, ppo_epoch epochs over num_mini_batch minibatches,
evaluate_actions at the clean observations for the clipped surrogate action_loss, the clipped
value loss and the entropy; aug_func.do_augmentation of the minibatch, new actions sampled by
actor_critic.act at the clean observations, evaluate_actions at the augmented observations,
action_loss_aug = -action_log_probs_aug.mean() and value_loss_aug = .5 * (torch.detach(values)
- values_aug).pow(2).mean(); optimizer.zero_grad(), one backward of value_loss * value_loss_coef
+ action_loss - dist_entropy * entropy_coef + aug_loss * aug_coef, clip_grad_norm_ and
optimizer.step()). Here G_pi is written as the paper's KL with the clean-observation
distribution detached, whose gradient in the augmented branch is the expectation of the
reference's sampled-action term -log pi(a_new|f(s)), a_new ~ pi(.|s); the rest follows
DrAC.update. The task: 8 corridors of 6 cells walked in parallel, actions left and right, reward
1 at the right end (then the walker restarts at the left), a small step cost; the observation is
the one-hot cell and a 4-dimensional background that is fixed per corridor and irrelevant to
the reward, and the augmentation redraws the background, as a colour jitter would; it runs under
torch.no_grad(), as the random convolution of data_augs.py RandomConv.do_augmentation does in
some of the authors' versions.
Bug: the clean-observation distribution in G_pi is not detached, probs_clean =
F.softmax(logits, -1), where the paper holds pi(.|s) fixed and the reference's policy term
-log pi(a_new|f(s)) reaches pi(.|s) only through discrete samples drawn by actor_critic.act
(ucb_rl2_meta/algo/drac.py DrAC.update; the value term detaches values with torch.detach), so
the KL also trains the clean branch: pi(.|s) is pulled towards pi(.|f(s)), the distribution at
a redrawn background, so the regulariser now moves the very policy that PPO's surrogate
optimises at the real observations, and the invariance is bought partly by changing the acting
policy rather than by fixing the augmented branch."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=8)
parser.add_argument("--num-steps", type=int, default=16)
parser.add_argument("--num-envs", type=int, default=8)
parser.add_argument("--ppo-epoch", type=int, default=3)
parser.add_argument("--num-mini-batch", type=int, default=4)
parser.add_argument("--clip-param", type=float, default=0.2)
parser.add_argument("--value-loss-coef", type=float, default=0.5)
parser.add_argument("--entropy-coef", type=float, default=0.01)
parser.add_argument("--aug-coef", type=float, default=0.1)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--gae-lambda", type=float, default=0.95)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--max-grad-norm", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the actor-critic")
args = parser.parse_args()
torch.manual_seed(args.seed)

length, bg_dim, n_actions = 6, 4, 2
obs_dim = length + bg_dim
background = torch.randn(args.num_envs, bg_dim)


def observe(pos):
    return torch.cat([F.one_hot(pos, length).float(), background], 1)


def augment(obs):
    """Redraw the background part of each observation; the cell stays."""
    return torch.cat([obs[:, :length], torch.randn(obs.shape[0], bg_dim)], 1)


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
        self.actor = nn.Linear(64, n_actions)
        self.critic = nn.Linear(64, 1)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.actor(h), self.critic(h).squeeze(-1)


actor_critic = ActorCritic()
optimizer = torch.optim.Adam(actor_critic.parameters(), lr=args.lr, eps=1e-5)

T, N = args.num_steps, args.num_envs
pos = torch.zeros(N, dtype=torch.long)
for update in range(args.updates):
    obs_buf = torch.zeros(T, N, obs_dim)
    act_buf = torch.zeros(T, N, dtype=torch.long)
    logp_buf, val_buf = torch.zeros(T, N), torch.zeros(T, N)
    rew_buf, mask_buf = torch.zeros(T, N), torch.zeros(T, N)
    for t in range(T):
        obs = observe(pos)
        with torch.no_grad():
            logits, value = actor_critic(obs)
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            logp = dist.log_prob(action)
        pos = (pos + 2 * action - 1).clamp(0, length - 1)
        done = pos == length - 1
        obs_buf[t], act_buf[t], logp_buf[t], val_buf[t] = obs, action, logp, value
        rew_buf[t], mask_buf[t] = done.float() - 0.01, (~done).float()
        pos = torch.where(done, torch.zeros_like(pos), pos)
    with torch.no_grad():
        _, next_value = actor_critic(observe(pos))

    # GAE returns, as in RolloutStorage.compute_returns
    returns, gae = torch.zeros(T, N), torch.zeros(N)
    for t in reversed(range(T)):
        v_next = next_value if t == T - 1 else val_buf[t + 1]
        delta = rew_buf[t] + args.gamma * v_next * mask_buf[t] - val_buf[t]
        gae = delta + args.gamma * args.gae_lambda * mask_buf[t] * gae
        returns[t] = gae + val_buf[t]
    adv = returns - val_buf
    adv = (adv - adv.mean()) / (adv.std() + 1e-5)

    obs_f, act_f, logp_f = obs_buf.view(T * N, -1), act_buf.view(-1), logp_buf.view(-1)
    val_f, ret_f, adv_f = val_buf.view(-1), returns.view(-1), adv.view(-1)
    mb = T * N // args.num_mini_batch
    for _ in range(args.ppo_epoch):
        perm = torch.randperm(T * N)
        for i in range(args.num_mini_batch):
            idx = perm[i * mb:(i + 1) * mb]
            obs_b, act_b, old_logp_b = obs_f[idx], act_f[idx], logp_f[idx]
            old_val_b, ret_b, adv_b = val_f[idx], ret_f[idx], adv_f[idx]

            logits, values = actor_critic(obs_b)
            dist = torch.distributions.Categorical(logits=logits)
            logp = dist.log_prob(act_b)
            entropy = dist.entropy().mean()
            ratio = torch.exp(logp - old_logp_b)
            surr1 = ratio * adv_b
            surr2 = ratio.clamp(1.0 - args.clip_param, 1.0 + args.clip_param) * adv_b
            action_loss = -torch.min(surr1, surr2).mean()
            value_clipped = old_val_b + (values - old_val_b).clamp(-args.clip_param,
                                                                   args.clip_param)
            value_loss = 0.5 * torch.max((values - ret_b).pow(2),
                                         (value_clipped - ret_b).pow(2)).mean()

            # DrAC regularisers: the augmented branch is pulled towards the fixed clean one
            with torch.no_grad():  # the augmentation itself is not differentiated
                obs_aug = augment(obs_b)
            logits_aug, values_aug = actor_critic(obs_aug)
            probs_clean = F.softmax(logits, -1)
            g_pi = (probs_clean * (torch.log(probs_clean + 1e-8)
                                   - F.log_softmax(logits_aug, -1))).sum(-1).mean()
            g_v = 0.5 * (values.detach() - values_aug).pow(2).mean()
            aug_loss = g_pi + g_v

            optimizer.zero_grad()
            loss = (value_loss * args.value_loss_coef + action_loss
                    - entropy * args.entropy_coef + aug_loss * args.aug_coef)
            loss.backward()
            nn.utils.clip_grad_norm_(actor_critic.parameters(), args.max_grad_norm)
            optimizer.step()
    if update % 3 == 0:
        print(f"update {update} reward {rew_buf.sum().item() / N:.2f} value loss "
              f"{value_loss.item():.4f} g_pi {g_pi.item():.4f} g_v {g_v.item():.4f}")

if args.out:
    torch.save({"actor_critic": actor_critic.state_dict()}, args.out)
