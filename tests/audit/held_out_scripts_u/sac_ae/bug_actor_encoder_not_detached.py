"""SAC+AE, soft actor-critic on rendered observations with a deterministic autoencoder, on a tiny
point-mass task whose "images" are flat vectors, written after Yarats, Zhang, Kostrikov, Amos,
Pineau and Fergus, "Improving Sample Efficiency in Model-Free Reinforcement Learning from
Images" (AAAI 2021, arXiv:1910.01741): the observation encoder is trained by the critic's TD
loss and by the reconstruction loss of a decoder (with an L2 penalty on the latent code and
weight decay on the decoder), never by the actor, whose input is the encoder's features with the
gradient cut; the target critic, its encoder included, is an exponential moving average of the
critic. With the authors' code (https://github.com/denisyarats/pytorch_sac_ae,
sac_ae.py SacAeAgent: update_critic takes the target under torch.no_grad() as
min of the target critic's two Q values at the policy's next action minus alpha log pi, and
steps one Adam over all the critic's parameters, its encoder included; update_actor_and_alpha
runs the actor and the critic with detach_encoder=True, so the actor loss trains the actor's
own fc/LayerNorm head and MLP but not the convolutional trunk it shares with the critic's
encoder (copy_conv_weights_from), then steps the temperature on -(log pi + target entropy)
detached; update_decoder steps encoder_optimizer over critic.encoder and decoder_optimizer on
the reconstruction loss plus decoder_latent_lambda times the latent L2; update calls the critic
every step, the actor and the soft target update every second step, tau 0.01 for the Q heads
and 0.05 for the encoder; encoder.py PixelEncoder: convs, fc, LayerNorm, tanh, detach after the
convs; train.py: uniformly random actions for init_steps, then the agent's samples). Two
phases: a warm-up with random actions fills the replay buffer and pre-trains the autoencoder
(the critic's encoder and the decoder) on its observations with the reconstruction loss alone,
where train.py instead runs a burst of init_steps full agent updates at the first learning step;
the target critic is a deep copy of the critic made after this warm-up; then the main loop acts
with the policy and runs the agent's update once per environment step. Here the "convs" are a
linear layer with ReLU over a stack of two 6x6 frames that render the point as a Gaussian blob,
hidden layers have 64 units, the feature dimension is 16 and the reconstruction target is the
frame centred at zero (no bit-depth reduction or dequantisation noise).
Bug: the actor update runs the actor without detach_encoder=True, so the actor loss
backpropagates into the conv trunk the actor shares with the critic's encoder and the actor's
Adam steps it, where update_actor_and_alpha cuts the gradient after the convs."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--init-steps", type=int, default=100, help="random-action warm-up steps")
parser.add_argument("--pretrain-updates", type=int, default=30)
parser.add_argument("--train-steps", type=int, default=120)
parser.add_argument("--episode-len", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--critic-tau", type=float, default=0.01)
parser.add_argument("--encoder-tau", type=float, default=0.05)
parser.add_argument("--actor-update-freq", type=int, default=2)
parser.add_argument("--target-update-freq", type=int, default=2)
parser.add_argument("--init-temperature", type=float, default=0.1)
parser.add_argument("--latent-lambda", type=float, default=1e-6)
parser.add_argument("--decoder-weight-lambda", type=float, default=1e-7)
parser.add_argument("--out", default=None, help="where to save the trained networks")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny networks: intra-op threads only add overhead

act_dim, hidden, feature_dim, grid = 2, 64, 16, 6
frame_dim = grid * grid
obs_dim = 2 * frame_dim
coords = torch.linspace(-1.5, 1.5, grid)
gy, gx = torch.meshgrid(coords, coords, indexing="ij")


def render(state):
    """A 6x6 frame of the point mass as a Gaussian blob, flattened."""
    blob = ((gx - state[0]) ** 2 + (gy - state[1]) ** 2) / (2 * 0.35 ** 2)
    return torch.exp(-blob).flatten()


def env_reset():
    return torch.cat([torch.rand(2) * 2 - 1, torch.zeros(2)])


def env_step(state, action):
    """Damped point mass pushed by a bounded force; the reward is minus its distance to 0."""
    vel = 0.85 * state[2:] + 0.2 * action
    pos = (state[:2] + 0.15 * vel).clamp(-1.5, 1.5)
    reward = -pos.norm() - 0.05 * action.pow(2).sum()
    return torch.cat([pos, vel]), reward


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU())
        self.fc = nn.Linear(hidden, feature_dim)
        self.ln = nn.LayerNorm(feature_dim)

    def forward(self, obs, detach=False):
        h = self.convs(obs)
        if detach:
            h = h.detach()
        return torch.tanh(self.ln(self.fc(h)))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(feature_dim, hidden), nn.ReLU(), nn.Linear(hidden, obs_dim))

    def forward(self, h):
        return self.net(h)


class Actor(nn.Module):
    def __init__(self, log_std_min=-10.0, log_std_max=2.0):
        super().__init__()
        self.encoder = Encoder()
        self.log_std_min, self.log_std_max = log_std_min, log_std_max
        self.trunk = nn.Sequential(nn.Linear(feature_dim, hidden), nn.ReLU(),
                                   nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2 * act_dim))

    def forward(self, obs, detach_encoder=False):
        mu, log_std = self.trunk(self.encoder(obs, detach=detach_encoder)).chunk(2, dim=-1)
        log_std = torch.tanh(log_std)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1)
        noise = torch.randn_like(mu)
        pi = mu + noise * log_std.exp()
        log_pi = (-0.5 * noise.pow(2) - log_std).sum(-1, keepdim=True) - 0.5 * math.log(2 * math.pi) * act_dim
        mu, pi = torch.tanh(mu), torch.tanh(pi)
        log_pi = log_pi - torch.log(F.relu(1 - pi.pow(2)) + 1e-6).sum(-1, keepdim=True)
        return mu, pi, log_pi


def q_function():
    return nn.Sequential(nn.Linear(feature_dim + act_dim, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.Q1, self.Q2 = q_function(), q_function()

    def forward(self, obs, action, detach_encoder=False):
        h = torch.cat([self.encoder(obs, detach=detach_encoder), action], dim=1)
        return self.Q1(h), self.Q2(h)


def soft_update(net, target_net, tau):
    for param, target_param in zip(net.parameters(), target_net.parameters()):
        target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)


actor, critic, decoder = Actor(), Critic(), Decoder()
actor.encoder.convs = critic.encoder.convs  # the actor and the critic share the conv trunk
log_alpha = torch.tensor(math.log(args.init_temperature), requires_grad=True)
target_entropy = -act_dim

encoder_optimizer = torch.optim.Adam(critic.encoder.parameters(), lr=1e-3)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-3, weight_decay=args.decoder_weight_lambda)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3, betas=(0.9, 0.999))
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.9, 0.999))
log_alpha_optimizer = torch.optim.Adam([log_alpha], lr=1e-4, betas=(0.5, 0.999))

capacity = args.init_steps + args.train_steps
buffer_obs = torch.zeros(capacity, obs_dim)
buffer_next_obs = torch.zeros(capacity, obs_dim)
buffer_action = torch.zeros(capacity, act_dim)
buffer_reward = torch.zeros(capacity, 1)
buffer_not_done = torch.ones(capacity, 1)  # episodes end only at the time limit: bootstrap
buffer_size = 0


def sample_batch():
    idx = torch.randint(0, buffer_size, (args.batch_size,))
    return buffer_obs[idx], buffer_action[idx], buffer_reward[idx], buffer_next_obs[idx], buffer_not_done[idx]


def update_critic(obs, action, reward, next_obs, not_done):
    with torch.no_grad():
        _, policy_action, log_pi = actor(next_obs)
        target_q1, target_q2 = critic_target(next_obs, policy_action)
        target_v = torch.min(target_q1, target_q2) - log_alpha.exp() * log_pi
        target_q = reward + not_done * args.discount * target_v
    current_q1, current_q2 = critic(obs, action)
    critic_loss = F.mse_loss(current_q1, target_q) + F.mse_loss(current_q2, target_q)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    return critic_loss


def update_actor_and_alpha(obs):
    _, pi, log_pi = actor(obs)
    actor_q1, actor_q2 = critic(obs, pi, detach_encoder=True)
    actor_loss = (log_alpha.exp().detach() * log_pi - torch.min(actor_q1, actor_q2)).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
    alpha_loss = (log_alpha.exp() * (-log_pi - target_entropy).detach()).mean()
    log_alpha_optimizer.zero_grad()
    alpha_loss.backward()
    log_alpha_optimizer.step()


def update_decoder(obs):
    h = critic.encoder(obs)
    rec_loss = F.mse_loss(decoder(h), obs - 0.5)
    latent_loss = (0.5 * h.pow(2).sum(1)).mean()
    loss = rec_loss + args.latent_lambda * latent_loss
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return rec_loss


def add_transition(obs, action, reward, next_obs):
    global buffer_size
    buffer_obs[buffer_size], buffer_action[buffer_size] = obs, action
    buffer_reward[buffer_size], buffer_next_obs[buffer_size] = reward, next_obs
    buffer_size += 1


# phase 1: random-action warm-up, then pre-training of the autoencoder on the warm-up frames
state = env_reset()
frames = [render(state), render(state)]
for t in range(args.init_steps):
    if t > 0 and t % args.episode_len == 0:
        state = env_reset()
        frames = [render(state), render(state)]
    obs = torch.cat(frames)
    action = torch.rand(act_dim) * 2 - 1
    state, reward = env_step(state, action)
    frames = [frames[1], render(state)]
    add_transition(obs, action, reward, torch.cat(frames))

for step in range(args.pretrain_updates):
    rec_loss = update_decoder(sample_batch()[0])
print(f"pre-training reconstruction loss {rec_loss.item():.4f}")

# phase 2: SAC+AE, one update per environment step, acting with the policy
critic_target = copy.deepcopy(critic)
state = env_reset()
frames = [render(state), render(state)]
episode_return = 0.0
for step in range(args.train_steps):
    if step > 0 and step % args.episode_len == 0:
        print(f"step {step} episode return {episode_return:.2f}")
        state = env_reset()
        frames = [render(state), render(state)]
        episode_return = 0.0
    obs = torch.cat(frames)
    with torch.no_grad():
        _, action, _ = actor(obs.unsqueeze(0))
        action = action.squeeze(0)

    obs_b, action_b, reward_b, next_obs_b, not_done_b = sample_batch()
    critic_loss = update_critic(obs_b, action_b, reward_b, next_obs_b, not_done_b)
    if step % args.actor_update_freq == 0:
        update_actor_and_alpha(obs_b)
    if step % args.target_update_freq == 0:
        soft_update(critic.Q1, critic_target.Q1, args.critic_tau)
        soft_update(critic.Q2, critic_target.Q2, args.critic_tau)
        soft_update(critic.encoder, critic_target.encoder, args.encoder_tau)
    update_decoder(obs_b)

    state, reward = env_step(state, action)
    frames = [frames[1], render(state)]
    add_transition(obs, action, reward, torch.cat(frames))
    episode_return += reward.item()

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict(),
                "critic_target": critic_target.state_dict(), "decoder": decoder.state_dict(),
                "log_alpha": log_alpha.detach().clone()}, args.out)
