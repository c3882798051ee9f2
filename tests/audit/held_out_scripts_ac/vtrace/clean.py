"""IMPALA learner with V-trace off-policy actor-critic targets on a tiny corridor environment.

Paper: Lasse Espeholt, Hubert Soyer, Remi Munos, Karen Simonyan, Volodymyr Mnih, Tom Ward,
Yotam Doron, Vlad Firoiu, Tim Harley, Iain Dunning, Shane Legg and Koray Kavukcuoglu, "IMPALA:
Scalable Distributed Deep-RL with Importance Weighted Actor-Learner Architectures",
arXiv:1802.01561, ICML 2018.
Reference implementations: google-deepmind/scalable_agent, vtrace.py (from_logits,
from_importance_weights) and experiment.py (build_learner); facebookresearch/torchbeast,
torchbeast/core/vtrace.py (from_logits; from_importance_weights decorated with
@torch.no_grad(), so vs and pg_advantages carry no gradient) and torchbeast/monobeast.py (act:
the actor model runs under torch.no_grad() and writes frame, reward, done, last_action,
policy_logits and action into a T+1 rollout buffer whose entry 0 is the previous rollout's last
step; learn: learner forward over all T+1 frames, bootstrap from the last baseline, shift
batch[1:] against outputs[:-1], V-trace from the behaviour logits in the buffer,
compute_policy_gradient_loss / compute_baseline_loss / compute_entropy_loss, zero_grad,
backward, clip_grad_norm_ at 40, RMSprop step, LambdaLR step, then
actor_model.load_state_dict(model.state_dict())).

The environment is a batch of corridors of 8 cells written in the script: the agent starts in
a random cell of the first seven, moves left, stays or moves right, gets reward 1 when it reaches
the last cell (the episode ends and restarts) and -0.02 per other step, and an episode is cut
after 16 steps. The network sees the one-hot cell, the one-hot last action and the clipped last
reward (as torchbeast's AtariNet does), and has a policy head and a baseline head on a shared
MLP torso. To reproduce IMPALA's policy lag in one process, actor rollouts go through a queue
and the learner trains on the rollout collected two updates earlier, so the behaviour policy
differs from the learner's policy and the importance weights rho are not 1. The V-trace
targets vs and the policy-gradient advantages are computed without gradient; the baseline is
regressed on vs, the policy follows the clipped-rho advantages, and an entropy bonus is added.
One RMSprop optimizer over the learner's parameters with a linearly decaying learning rate.
As published: clean.
"""
import argparse
import collections

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--updates", type=int, default=60)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--unroll_length", type=int, default=10)
parser.add_argument("--lag", type=int, default=2)
parser.add_argument("--corridor", type=int, default=8)
parser.add_argument("--max_steps", type=int, default=16)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--discounting", type=float, default=0.95)
parser.add_argument("--baseline_cost", type=float, default=0.5)
parser.add_argument("--entropy_cost", type=float, default=0.01)
parser.add_argument("--learning_rate", type=float, default=3e-3)
parser.add_argument("--alpha", type=float, default=0.99)
parser.add_argument("--epsilon", type=float, default=0.01)
parser.add_argument("--grad_norm_clipping", type=float, default=40.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

NUM_ACTIONS = 3  # left, stay, right


class Corridor:
    """B corridors stepped together; resets an episode as soon as it is done."""

    def __init__(self, batch_size, length, max_steps):
        self.B, self.L, self.max_steps = batch_size, length, max_steps
        self.pos = torch.randint(0, length - 1, (batch_size,))
        self.steps = torch.zeros(batch_size, dtype=torch.long)
        self.episode_return = torch.zeros(batch_size)

    def frame(self):
        return F.one_hot(self.pos, self.L).float()

    def initial(self):
        return dict(frame=self.frame(), reward=torch.zeros(self.B),
                    done=torch.zeros(self.B, dtype=torch.bool),
                    last_action=torch.zeros(self.B, dtype=torch.long))

    def step(self, action):
        self.pos = (self.pos + action - 1).clamp(0, self.L - 1)
        self.steps += 1
        at_goal = self.pos == self.L - 1
        reward = torch.where(at_goal, torch.ones(self.B), torch.full((self.B,), -0.02))
        self.episode_return += reward
        done = at_goal | (self.steps >= self.max_steps)
        finished = self.episode_return[done].tolist()
        self.pos = torch.where(done, torch.randint(0, self.L - 1, (self.B,)), self.pos)
        self.steps = torch.where(done, torch.zeros_like(self.steps), self.steps)
        self.episode_return = torch.where(done, torch.zeros(self.B), self.episode_return)
        return dict(frame=self.frame(), reward=reward, done=done, last_action=action), finished


class Net(nn.Module):
    def __init__(self, frame_size, num_actions, hidden):
        super().__init__()
        self.num_actions = num_actions
        self.torso = nn.Sequential(
            nn.Linear(frame_size + num_actions + 1, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU())
        self.policy = nn.Linear(hidden, num_actions)
        self.baseline = nn.Linear(hidden, 1)

    def forward(self, inputs):
        last_action = F.one_hot(inputs["last_action"], self.num_actions).float()
        clipped_reward = torch.clamp(inputs["reward"], -1, 1).unsqueeze(-1)
        x = torch.cat([inputs["frame"], last_action, clipped_reward], dim=-1)
        core = self.torso(x)
        policy_logits = self.policy(core)
        baseline = self.baseline(core).squeeze(-1)
        if self.training:
            action = torch.multinomial(
                F.softmax(policy_logits.reshape(-1, self.num_actions), dim=1), 1)
            action = action.view(policy_logits.shape[:-1])
        else:
            action = torch.argmax(policy_logits, dim=-1)
        return dict(policy_logits=policy_logits, baseline=baseline, action=action)


def action_log_probs(policy_logits, actions):
    return -F.nll_loss(F.log_softmax(torch.flatten(policy_logits, 0, -2), dim=-1),
                       torch.flatten(actions), reduction="none").view_as(actions)


VTraceReturns = collections.namedtuple("VTraceReturns", "vs pg_advantages log_rhos")


@torch.no_grad()
def vtrace_from_importance_weights(log_rhos, discounts, rewards, values, bootstrap_value,
                                   clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0):
    rhos = torch.exp(log_rhos)
    clipped_rhos = torch.clamp(rhos, max=clip_rho_threshold)
    cs = torch.clamp(rhos, max=1.0)
    values_t_plus_1 = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)
    acc = torch.zeros_like(bootstrap_value)
    result = []
    for t in range(discounts.shape[0] - 1, -1, -1):
        acc = deltas[t] + discounts[t] * cs[t] * acc
        result.append(acc)
    result.reverse()
    vs = torch.stack(result) + values
    vs_t_plus_1 = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
    clipped_pg_rhos = torch.clamp(rhos, max=clip_pg_rho_threshold)
    pg_advantages = clipped_pg_rhos * (rewards + discounts * vs_t_plus_1 - values)
    return vs, pg_advantages


def vtrace_from_logits(behavior_policy_logits, target_policy_logits, actions, discounts,
                       rewards, values, bootstrap_value):
    target_action_log_probs = action_log_probs(target_policy_logits, actions)
    behavior_action_log_probs = action_log_probs(behavior_policy_logits, actions)
    log_rhos = target_action_log_probs - behavior_action_log_probs
    vs, pg_advantages = vtrace_from_importance_weights(
        log_rhos, discounts, rewards, values, bootstrap_value)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages, log_rhos=log_rhos)


def compute_baseline_loss(advantages):
    return 0.5 * torch.sum(advantages ** 2)


def compute_entropy_loss(logits):
    policy = F.softmax(logits, dim=-1)
    log_policy = F.log_softmax(logits, dim=-1)
    return torch.sum(policy * log_policy)


def compute_policy_gradient_loss(logits, actions, advantages):
    cross_entropy = F.nll_loss(F.log_softmax(torch.flatten(logits, 0, 1), dim=-1),
                               target=torch.flatten(actions, 0, 1), reduction="none")
    cross_entropy = cross_entropy.view_as(advantages)
    return torch.sum(cross_entropy * advantages.detach())


def act(actor_model, env, state):
    """One unroll of T steps; entry 0 repeats the last step of the previous unroll."""
    env_output, agent_output = state
    keys_env, keys_agent = ("frame", "reward", "done", "last_action"), ("policy_logits", "action")
    rollout = {k: [env_output[k]] for k in keys_env}
    rollout.update({k: [agent_output[k]] for k in keys_agent})
    finished = []
    for _ in range(args.unroll_length):
        with torch.no_grad():
            agent_output = actor_model(env_output)
        env_output, done_returns = env.step(agent_output["action"])
        finished += done_returns
        for k in keys_env:
            rollout[k].append(env_output[k])
        for k in keys_agent:
            rollout[k].append(agent_output[k])
    batch = {k: torch.stack(v) for k, v in rollout.items()}
    return batch, (env_output, agent_output), finished


def learn(actor_model, model, batch, optimizer, scheduler):
    learner_outputs = model(batch)
    bootstrap_value = learner_outputs["baseline"][-1]
    batch = {key: tensor[1:] for key, tensor in batch.items()}
    learner_outputs = {key: tensor[:-1] for key, tensor in learner_outputs.items()}

    clipped_rewards = torch.clamp(batch["reward"], -1, 1)
    discounts = (~batch["done"]).float() * args.discounting
    vtrace_returns = vtrace_from_logits(
        behavior_policy_logits=batch["policy_logits"],
        target_policy_logits=learner_outputs["policy_logits"],
        actions=batch["action"],
        discounts=discounts,
        rewards=clipped_rewards,
        values=learner_outputs["baseline"],
        bootstrap_value=bootstrap_value)

    pg_loss = compute_policy_gradient_loss(learner_outputs["policy_logits"], batch["action"],
                                           vtrace_returns.pg_advantages)
    baseline_loss = args.baseline_cost * compute_baseline_loss(
        vtrace_returns.vs - learner_outputs["baseline"])
    entropy_loss = args.entropy_cost * compute_entropy_loss(learner_outputs["policy_logits"])
    total_loss = pg_loss + baseline_loss + entropy_loss

    optimizer.zero_grad()
    total_loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), args.grad_norm_clipping)
    optimizer.step()
    scheduler.step()

    actor_model.load_state_dict(model.state_dict())
    rho_dev = vtrace_returns.log_rhos.abs().mean().item()
    return total_loss.item(), pg_loss.item(), baseline_loss.item(), rho_dev


env = Corridor(args.batch_size, args.corridor, args.max_steps)
actor_model = Net(args.corridor, NUM_ACTIONS, args.hidden)
model = Net(args.corridor, NUM_ACTIONS, args.hidden)
model.load_state_dict(actor_model.state_dict())

optimizer = torch.optim.RMSprop(model.parameters(), lr=args.learning_rate, momentum=0.0,
                                eps=args.epsilon, alpha=args.alpha)
total_steps = args.updates * args.unroll_length * args.batch_size


def lr_lambda(epoch):
    return 1 - min(epoch * args.unroll_length * args.batch_size, total_steps) / total_steps


scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

env_output = env.initial()
with torch.no_grad():
    agent_output = actor_model(env_output)
state = (env_output, agent_output)
queue = collections.deque()
for _ in range(args.lag):
    rollout, state, _ = act(actor_model, env, state)
    queue.append(rollout)

recent_returns = collections.deque(maxlen=50)
for update in range(args.updates):
    rollout, state, finished = act(actor_model, env, state)
    recent_returns.extend(finished)
    queue.append(rollout)
    batch = queue.popleft()
    total_loss, pg_loss, baseline_loss, rho_dev = learn(
        actor_model, model, batch, optimizer, scheduler)
    if update % 15 == 0 or update == args.updates - 1:
        mean_return = sum(recent_returns) / max(len(recent_returns), 1)
        print(f"update {update:3d} loss {total_loss:8.4f} pg {pg_loss:8.4f} "
              f"baseline {baseline_loss:7.4f} |log rho| {rho_dev:.3f} return {mean_return:.3f}")

model.eval()
eval_env = Corridor(64, args.corridor, args.max_steps)
eval_output = eval_env.initial()
eval_finished = []
with torch.no_grad():
    for _ in range(args.max_steps):
        eval_output, done_returns = eval_env.step(model(eval_output)["action"])
        eval_finished += done_returns
print(f"greedy eval: {len(eval_finished)} episodes, mean return "
      f"{sum(eval_finished) / max(len(eval_finished), 1):.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "actor_model": actor_model.state_dict()},
               args.out)
