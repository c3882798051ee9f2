"""ValueDICE imitation learning on a tiny synthetic point-mass task, after a behaviour-cloning
warm start of the actor, written after Kostrikov, Nachum and Tompson, "Imitation Learning via
Off-Policy Distribution Matching" (ICLR 2020, arXiv:1912.05032): a value function nu(s, a) and
the policy pi are trained on the same off-policy objective, the Donsker-Varadhan form of
-KL(d_pi || d_exp) rewritten with nu - gamma * nu(s', pi(s')) differences,
J = log E_exp[exp(nu(s, a) - gamma nu(s', a'))] - (1 - gamma) E_s0[nu(s0, pi(s0))], mixed with
replay data for regularisation; nu minimises J (plus a gradient penalty) and pi maximises it.
The authors' code is google-research/google-research (https://github.com/google-research/
google-research, value_dice/value_dice.py class ValueDICE: nu_net is an MLP with orthogonal
initialisation; update draws expert (s, a, s') and replay-buffer batches, takes the actor's
sampled actions at the expert next states, the replay next states and the expert states used as
initial states, forms expert_diff and rb_diff, the linear loss (1 - gamma) nu(s0, pi(s0)) and
mean rb_diff weighted by 1 - replay_regularization and replay_regularization, and the
non-linear loss as tf.stop_gradient(weighted_softmax(rb_expert_diff, weights)) times the
differences, whose gradient is that of the log-mean-exp; loss = non_linear - linear; the
gradient penalty on nu at random interpolates of the expert and replay inputs, weighted
nu_reg = 10; nu_loss = loss + penalty and pi_loss = -loss + orthogonal_regularization(actor
trunk), each differentiated only with respect to its own network's variables and applied by its
own Adam; twin_sac.py Actor, a tanh-squashed Gaussian with a bounded log-std, and SAC.train_bc,
the maximum-likelihood behaviour cloning loss; train_eval.py fills the policy replay buffer
with random actions first, then adds a transition of the actor's mean action plus N(0, 0.1)
noise per environment step and runs an update after it, with discount 0.99 and
replay_regularization 0.1). Phase 1 here is train_bc's behaviour cloning on the expert data;
phase 2 continues with ValueDICE from that actor, which changes only the starting point.
The environment is a 2-D point mass pushed towards a goal, the expert a clipped P-controller.
Bug: the softmax weights of the non-linear loss are not detached (the reference wraps them in
tf.stop_gradient), so nu and pi follow the gradient of w . diff, not of the log-mean-exp."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--bc-steps", type=int, default=40)
parser.add_argument("--steps", type=int, default=100, help="ValueDICE environment steps")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--n-envs", type=int, default=8)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--replay-regularization", type=float, default=0.1)
parser.add_argument("--nu-reg", type=float, default=10.0)
parser.add_argument("--nu-lr", type=float, default=1e-3)
parser.add_argument("--actor-lr", type=float, default=1e-4)
parser.add_argument("--out", default=None, help="where to save nu_net and the actor")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

state_dim, action_dim, hidden, horizon = 2, 2, 64, 20
goal = torch.tensor([0.6, -0.4])
EPS = torch.finfo(torch.float32).eps


def env_step(s, a):
    return (s + 0.2 * a + 0.01 * torch.randn_like(s)).clamp(-1.5, 1.5)


def reset(n):
    return torch.rand(n, state_dim) * 2 - 1


# expert demonstrations: a clipped P-controller with a little action noise
expert = {"s": [], "a": [], "s_next": []}
s = reset(10)
for t in range(horizon):
    a = ((goal - s) * 2.0).clamp(-1, 1) * 0.9 + 0.05 * torch.randn_like(s)
    s_next = env_step(s, a.clamp(-1, 1))
    expert["s"].append(s), expert["a"].append(a.clamp(-0.99, 0.99)), expert["s_next"].append(s_next)
    s = s_next
expert = {k: torch.cat(v) for k, v in expert.items()}
n_expert = expert["s"].shape[0]


class Actor(nn.Module):
    """Gaussian policy with tanh squashing: (mode, sampled action, log-probability)."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(),
                                   nn.Linear(hidden, hidden), nn.ReLU(),
                                   nn.Linear(hidden, 2 * action_dim))
        for m in self.trunk:
            if isinstance(m, nn.Linear):
                nn.init.orthogonal_(m.weight)
                nn.init.zeros_(m.bias)

    def dist(self, s):
        mu, log_std = self.trunk(s).chunk(2, dim=1)
        log_std = -5 + 0.5 * (2 - (-5)) * (torch.tanh(log_std) + 1)
        return mu, torch.distributions.Normal(mu, log_std.exp())

    def forward(self, s):
        mu, dist = self.dist(s)
        pre = dist.rsample()
        action = torch.tanh(pre)
        log_prob = (dist.log_prob(pre) - torch.log(1 - action.pow(2) + EPS)).sum(1, keepdim=True)
        return torch.tanh(mu), action, log_prob

    def log_prob(self, s, a):
        _, dist = self.dist(s)
        pre = torch.atanh(a)
        return (dist.log_prob(pre) - torch.log(1 - a.pow(2) + EPS)).sum(1, keepdim=True)


def orthogonal_regularization(model, reg_coef=1e-4):
    reg = 0
    for m in model:
        if isinstance(m, nn.Linear):
            prod = m.weight @ m.weight.t()
            reg = reg + torch.sum((prod * (1 - torch.eye(prod.shape[0]))).pow(2))
    return reg * reg_coef


def weighted_softmax(x, weights):
    x = x - x.max(0)[0]
    return weights * torch.exp(x) / torch.sum(weights * torch.exp(x), 0, keepdim=True)


nu_net = nn.Sequential(nn.Linear(state_dim + action_dim, hidden), nn.ReLU(),
                       nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1, bias=False))
for m in nu_net:
    if isinstance(m, nn.Linear):
        nn.init.orthogonal_(m.weight)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
actor = Actor()

# phase 1: behaviour cloning of the actor on the expert data (maximum likelihood)
bc_optimizer = torch.optim.Adam(actor.parameters(), lr=3e-3)
for step in range(args.bc_steps):
    idx = torch.randint(0, n_expert, (args.batch_size,))
    bc_loss = -actor.log_prob(expert["s"][idx], expert["a"][idx]).mean()
    bc_loss = bc_loss + orthogonal_regularization(actor.trunk)
    bc_optimizer.zero_grad()
    bc_loss.backward()
    bc_optimizer.step()
    if step % 20 == 0:
        print(f"bc {step} loss {bc_loss.item():.4f}")

# the policy replay buffer, filled first with one episode of random actions per environment
replay = {"s": [], "a": [], "s_next": []}
s = reset(args.n_envs)
for t in range(horizon):
    a = torch.rand(args.n_envs, action_dim) * 2 - 1
    s_next = env_step(s, a)
    replay["s"].append(s), replay["a"].append(a), replay["s_next"].append(s_next)
    s = s_next

# phase 2: ValueDICE, one environment step of the actor and one update per iteration
nu_optimizer = torch.optim.Adam(nu_net.parameters(), lr=args.nu_lr)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)
s = reset(args.n_envs)
for step in range(args.steps):
    with torch.no_grad():
        mean_action, _, _ = actor(s)
        a = (mean_action + 0.1 * torch.randn_like(mean_action)).clamp(-1, 1)
        s_next = env_step(s, a)
    replay["s"].append(s), replay["a"].append(a), replay["s_next"].append(s_next)
    s = reset(args.n_envs) if (step + 1) % horizon == 0 else s_next

    idx = torch.randint(0, n_expert, (args.batch_size,))
    expert_states, expert_actions = expert["s"][idx], expert["a"][idx]
    expert_next_states = expert["s_next"][idx]
    expert_initial_states = expert_states
    rb_idx = torch.randint(0, len(replay["s"]) * args.n_envs, (args.batch_size,))
    rb_states = torch.cat(replay["s"])[rb_idx]
    rb_actions = torch.cat(replay["a"])[rb_idx]
    rb_next_states = torch.cat(replay["s_next"])[rb_idx]

    _, policy_next_actions, _ = actor(expert_next_states)
    _, rb_next_actions, rb_log_prob = actor(rb_next_states)
    _, policy_initial_actions, _ = actor(expert_initial_states)

    expert_init_inputs = torch.cat([expert_initial_states, policy_initial_actions], 1)
    expert_inputs = torch.cat([expert_states, expert_actions], 1)
    expert_next_inputs = torch.cat([expert_next_states, policy_next_actions], 1)
    rb_inputs = torch.cat([rb_states, rb_actions], 1)
    rb_next_inputs = torch.cat([rb_next_states, rb_next_actions], 1)

    expert_nu_0 = nu_net(expert_init_inputs)
    expert_nu = nu_net(expert_inputs)
    expert_nu_next = nu_net(expert_next_inputs)
    rb_nu = nu_net(rb_inputs)
    rb_nu_next = nu_net(rb_next_inputs)

    expert_diff = expert_nu - args.discount * expert_nu_next
    rb_diff = rb_nu - args.discount * rb_nu_next
    linear_loss_expert = torch.mean(expert_nu_0 * (1 - args.discount))
    linear_loss_rb = torch.mean(rb_diff)
    rb_expert_diff = torch.cat([expert_diff, rb_diff], 0)
    rb_expert_weights = torch.cat([torch.ones_like(expert_diff) * (1 - args.replay_regularization),
                                   torch.ones_like(rb_diff) * args.replay_regularization], 0)
    rb_expert_weights = rb_expert_weights / rb_expert_weights.sum()
    non_linear_loss = torch.sum(
        weighted_softmax(rb_expert_diff, rb_expert_weights) * rb_expert_diff)
    linear_loss = (linear_loss_expert * (1 - args.replay_regularization)
                   + linear_loss_rb * args.replay_regularization)
    loss = non_linear_loss - linear_loss

    # gradient penalty on nu at random interpolates of expert and replay inputs
    alpha = torch.rand(expert_inputs.shape[0], 1)
    nu_inter = alpha * expert_inputs + (1 - alpha) * rb_inputs
    nu_next_inter = alpha * expert_next_inputs + (1 - alpha) * rb_next_inputs
    nu_inter = torch.cat([nu_inter, nu_next_inter], 0)
    nu_output = nu_net(nu_inter)
    nu_grad = torch.autograd.grad(nu_output.sum(), nu_inter, create_graph=True)[0] + EPS
    nu_grad_penalty = torch.mean((torch.norm(nu_grad, dim=-1, keepdim=True) - 1).pow(2))

    nu_loss = loss + nu_grad_penalty * args.nu_reg
    pi_loss = -loss + orthogonal_regularization(actor.trunk)

    nu_optimizer.zero_grad()
    actor_optimizer.zero_grad()
    nu_loss.backward(inputs=list(nu_net.parameters()), retain_graph=True)
    pi_loss.backward(inputs=list(actor.parameters()))
    nu_optimizer.step()
    actor_optimizer.step()
    if step % 50 == 0:
        print(f"valuedice {step} loss {loss.item():.4f} penalty {nu_grad_penalty.item():.4f} "
              f"entropy {-rb_log_prob.mean().item():.3f}")

with torch.no_grad():
    mean_action, _, _ = actor(expert["s"])
    print(f"mse to expert actions {F.mse_loss(mean_action, expert['a']).item():.4f}")

if args.out:
    torch.save({"nu_net": nu_net.state_dict(), "actor": actor.state_dict()}, args.out)
