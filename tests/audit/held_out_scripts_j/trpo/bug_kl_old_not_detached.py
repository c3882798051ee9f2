"""Trust region policy optimization at a tiny size, written after Schulman, Levine, Moritz, Jordan
and Abbeel, "Trust Region Policy Optimization" (ICML 2015, arXiv:1502.05477), sections 5 and 6
and appendix C (the Fisher-vector products, conjugate gradient and the line search), with
ikostrikov/pytorch-trpo (https://github.com/ikostrikov/pytorch-trpo, main.py update_params: GAE
advantages from values.data, the value network fitted apart by L-BFGS on the discounted returns
through get_value_loss, which clears every parameter's .grad before its backward and adds an L2
penalty; get_loss, -advantages * exp(log_prob - fixed_log_prob) with fixed_log_prob taken as .data;
get_kl, the KL of the policy to a copy of its own outputs cut from the graph (mean0 =
Variable(mean1.data), log_std0, std0 likewise); trpo.py trpo_step, conjugate_gradients, Fvp (the
gradient of the KL, then the gradient of its product with v, plus damping * v), linesearch with
an accept ratio of 0.1). Each iteration collects a batch of short episodes of a point-reaching
task made in the script with the Gaussian policy, fits the value network with torch's L-BFGS (a
strong-Wolfe line search, as scipy's fmin_l_bfgs_b has) on a closure that clears its gradients,
and takes one natural-gradient step of the policy scaled to the KL radius, backtracked until the
surrogate improves. Injected bug: get_kl compares the policy with its own outputs left on the
graph (mean0, log_std0 = mean1, log_std1, for the copies ikostrikov's get_kl cuts with .data), so
the KL is identically zero and so are its gradient and its Hessian: every Fisher-vector product is
damping * v alone, conjugate gradient returns the plain gradient over the damping, and the step is
scaled to a trust region measured in parameter space instead of in KL."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=8)
parser.add_argument("--n-episodes", type=int, default=32)
parser.add_argument("--horizon", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--tau", type=float, default=0.9, help="GAE lambda")
parser.add_argument("--max-kl", type=float, default=1e-2)
parser.add_argument("--damping", type=float, default=1e-1)
parser.add_argument("--l2-reg", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, hidden_dim = 4, 2, 32


def rollout(policy, n):
    """Episodes of a point moved towards a goal; stacked as [horizon, n, ...]."""
    obs = torch.cat([2 * torch.rand(n, 2) - 1, 2 * torch.rand(n, 2) - 1], dim=1)
    states, actions, rewards = [], [], []
    for _ in range(args.horizon):
        with torch.no_grad():
            mean, log_std = policy(obs)
            action = mean + log_std.exp() * torch.randn_like(mean)
        position = (obs[:, :2] + 0.2 * action.clamp(-1, 1)).clamp(-1, 1)
        states.append(obs)
        actions.append(action)
        rewards.append(-(position - obs[:, 2:]).norm(dim=1, keepdim=True))
        obs = torch.cat([position, obs[:, 2:]], dim=1)
    return torch.stack(states), torch.stack(actions), torch.stack(rewards)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = nn.Sequential(nn.Linear(obs_dim, hidden_dim), nn.Tanh(),
                                  nn.Linear(hidden_dim, act_dim))
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs):
        return self.mean(obs), self.log_std.expand(obs.shape[0], act_dim)


def log_density(actions, mean, log_std):
    var = (2 * log_std).exp()
    return (-(actions - mean).pow(2) / (2 * var) - log_std - 0.9189385).sum(-1, keepdim=True)


def flat_params(model):
    return torch.cat([p.detach().view(-1) for p in model.parameters()])


def set_flat_params(model, flat):
    with torch.no_grad():
        i = 0
        for p in model.parameters():
            p.copy_(flat[i:i + p.numel()].view_as(p))
            i += p.numel()


def conjugate_gradients(fvp, b, n_steps=10, residual_tol=1e-10):
    x, r, p = torch.zeros_like(b), b.clone(), b.clone()
    rdotr = r.dot(r)
    for _ in range(n_steps):
        avp = fvp(p)
        alpha = rdotr / p.dot(avp)
        x, r = x + alpha * p, r - alpha * avp
        new_rdotr = r.dot(r)
        p, rdotr = r + new_rdotr / rdotr * p, new_rdotr
        if rdotr < residual_tol:
            break
    return x


policy, value_net = Policy(), nn.Sequential(nn.Linear(obs_dim, hidden_dim), nn.Tanh(),
                                            nn.Linear(hidden_dim, 1))
value_optimizer = torch.optim.LBFGS(value_net.parameters(), lr=1.0, max_iter=10,
                                    line_search_fn="strong_wolfe")
for it in range(args.iterations):
    states, actions, rewards = rollout(policy, args.n_episodes)
    values = value_net(states).detach()
    returns, advantages = torch.zeros_like(rewards), torch.zeros_like(rewards)
    prev_return, prev_value, prev_adv = 0.0, 0.0, 0.0
    for t in reversed(range(args.horizon)):
        returns[t] = rewards[t] + args.gamma * prev_return
        delta = rewards[t] + args.gamma * prev_value - values[t]
        advantages[t] = delta + args.gamma * args.tau * prev_adv
        prev_return, prev_value, prev_adv = returns[t], values[t], advantages[t]
    states, actions = states.flatten(0, 1), actions.flatten(0, 1)
    returns, advantages = returns.flatten(0, 1), advantages.flatten(0, 1)

    def value_closure():
        value_optimizer.zero_grad()
        value_loss = (value_net(states) - returns).pow(2).mean()
        value_loss = value_loss + args.l2_reg * sum(p.pow(2).sum() for p in value_net.parameters())
        value_loss.backward()
        return value_loss

    value_loss = value_optimizer.step(value_closure)
    advantages = (advantages - advantages.mean()) / advantages.std()
    fixed_log_prob = log_density(actions, *policy(states)).detach()

    def get_loss():
        log_prob = log_density(actions, *policy(states))
        return -(advantages * (log_prob - fixed_log_prob).exp()).mean()

    def get_kl():
        mean1, log_std1 = policy(states)
        mean0, log_std0 = mean1, log_std1
        kl = (log_std1 - log_std0 + ((2 * log_std0).exp() + (mean0 - mean1).pow(2))
              / (2 * (2 * log_std1).exp()) - 0.5)
        return kl.sum(1).mean()

    def fvp(v):
        grads = torch.autograd.grad(get_kl(), list(policy.parameters()), create_graph=True)
        kl_v = (torch.cat([g.view(-1) for g in grads]) * v).sum()
        grads = torch.autograd.grad(kl_v, list(policy.parameters()))
        return torch.cat([g.reshape(-1) for g in grads]) + args.damping * v

    loss = get_loss()
    loss_grad = torch.cat([g.view(-1) for g in torch.autograd.grad(loss, policy.parameters())])
    step_dir = conjugate_gradients(fvp, -loss_grad)
    shs = 0.5 * step_dir.dot(fvp(step_dir))
    full_step = step_dir / torch.sqrt(shs / args.max_kl)
    expected_improve = -loss_grad.dot(full_step)
    old_params = flat_params(policy)
    with torch.no_grad():
        for frac in 0.5 ** torch.arange(10.0):
            set_flat_params(policy, old_params + frac * full_step)
            improve = loss - get_loss()
            if improve > 0 and improve / (expected_improve * frac) > 0.1:
                break
        else:
            set_flat_params(policy, old_params)
        new_loss = get_loss()
    print(f"iteration {it} return {rewards.sum(0).mean().item():.4f} "
          f"value loss {value_loss.item():.4f} surrogate {new_loss.item():.4f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "value": value_net.state_dict()}, args.out)
