"""TD(lambda) with eligibility traces over a small value network, at a tiny size, written after
Sutton, "Learning to Predict by the Methods of Temporal Differences" (Machine Learning 3, 1988) and
Sutton and Barto, "Reinforcement Learning: An Introduction" (2nd ed., 2018), section 12.2
(semi-gradient TD(lambda): z <- gamma * lambda * z + grad v(S, w), delta = R + gamma * v(S', w) -
v(S, w), w <- w + alpha * delta * z, with v(terminal) = 0 and the trace reset every episode), with
dellalibera/td-gammon (https://github.com/dellalibera/td-gammon, td_gammon/model.py
TDGammon.update_weights: self.zero_grad() and p.backward() for the gradient of the current value,
then under torch.no_grad() the TD error p_next - p, the traces lamda * trace + weights.grad and the
weights moved by lr * td_error * trace) and ShangtongZhang/reinforcement-learning-an-introduction
(https://github.com/ShangtongZhang/reinforcement-learning-an-introduction, chapter12/random_walk.py
TemporalDifferenceLambda.learn and random_walk, the random walk of figure 12.6 with rewards -1 and
+1 at its two ends). Two phases: the value network is first warm-started by regression on the Monte
Carlo returns of a first batch of episodes (the lambda = 1 end of the lambda-return family, section
12.1) with its own Adam; then online TD(lambda) runs episode after episode, the weights moved
through their .grad by a plain SGD (p.grad = -delta * z, so SGD's step is w + alpha * delta * z). A
9-state random walk, one-hot states, made in the script. As published: clean."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warm-episodes", type=int, default=6)
parser.add_argument("--warm-steps", type=int, default=10)
parser.add_argument("--warm-lr", type=float, default=3e-2)
parser.add_argument("--episodes", type=int, default=6)
parser.add_argument("--gamma", type=float, default=1.0)
parser.add_argument("--lam", type=float, default=0.8)
parser.add_argument("--alpha", type=float, default=0.02)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, hidden_dim = 9, 16
start_state = n_states // 2
eye = torch.eye(n_states)


def run_episode():
    """States 0..n-1; a step left of 0 ends with reward -1, right of n-1 with reward +1."""
    state, transitions = start_state, []
    while True:
        next_state = state + (1 if torch.rand(()) < 0.5 else -1)
        done = next_state < 0 or next_state >= n_states
        reward = 0.0 if not done else (1.0 if next_state >= n_states else -1.0)
        transitions.append((state, reward, next_state, done))
        if done:
            return transitions
        state = next_state


value = nn.Sequential(nn.Linear(n_states, hidden_dim), nn.Sigmoid(), nn.Linear(hidden_dim, 1),
                      nn.Tanh())

# phase 1: warm start on the Monte Carlo returns of a first batch of episodes
states, returns = [], []
for _ in range(args.warm_episodes):
    transitions = run_episode()
    g = 0.0
    for state, reward, _, _ in reversed(transitions):
        g = reward + args.gamma * g
        states.append(state)
        returns.append(g)
states, returns = eye[torch.tensor(states)], torch.tensor(returns)
warm_optimizer = torch.optim.Adam(value.parameters(), lr=args.warm_lr)
for step in range(args.warm_steps):
    loss = (value(states).squeeze(1) - returns).pow(2).mean()
    loss.backward()
    warm_optimizer.step()
    warm_optimizer.zero_grad()
    print(f"warm {step} loss {loss.item():.4f}")

# phase 2: online semi-gradient TD(lambda) with accumulating traces
td_optimizer = torch.optim.SGD(value.parameters(), lr=args.alpha)
for episode in range(args.episodes):
    traces = [torch.zeros_like(p) for p in value.parameters()]
    transitions = run_episode()
    for state, reward, next_state, done in transitions:
        v = value(eye[state]).squeeze()
        with torch.no_grad():
            v_next = 0.0 if done else value(eye[next_state]).squeeze()
            delta = reward + args.gamma * v_next - v
        value.zero_grad()
        v.backward()
        with torch.no_grad():
            for p, z in zip(value.parameters(), traces):
                z.mul_(args.gamma * args.lam).add_(p.grad)
                p.grad = -delta * z
        td_optimizer.step()
    with torch.no_grad():
        values = value(eye).squeeze(1)
    print(f"episode {episode} length {len(transitions)} values "
          + " ".join(f"{x:.3f}" for x in values.tolist()))

if args.out:
    torch.save({"value": value.state_dict()}, args.out)
