"""SeqGAN on a synthetic oracle-LSTM language: MLE pre-training, discriminator pre-training, then
adversarial training of the generator by policy gradient with Monte Carlo roll-out rewards.

Paper: Lantao Yu, Weinan Zhang, Jun Wang and Yong Yu, "SeqGAN: Sequence Generative Adversarial
Nets with Policy Gradient", AAAI 2017, arXiv:1609.05473 (2016).
Reference implementation: LantaoYu/SeqGAN, sequence_gan.py (main: oracle samples as positive
data, PRE_EPOCH_NUM epochs of pre_train_epoch, discriminator pre-training on fresh negatives,
then TOTAL_BATCH rounds of one policy-gradient generator update followed by discriminator
updates), generator.py (Generator: embedding, LSTM unit and output unit all in g_params, every
weight drawn from N(0, 0.1); pretrain_loss: the teacher-forced token cross entropy; g_loss:
minus the sum over the batch and the time steps of log G(y_t | Y_1:t-1) times the reward; a
separate Adam optimizer, lr 0.01, for each of the two losses, both with clip_by_global_norm 5.0),
rollout.py (ROLLOUT.get_reward: for every prefix length the rest of the sequence is sampled by
the roll-out policy, the discriminator's probability of "real" is averaged over rollout_num
roll-outs, and the last token is scored on the full sequence; the roll-out network's weights
are tf.identity reads of the generator's variables, so it rolls out with the current generator,
as the paper's Algorithm 1 sets beta <- theta), discriminator.py (Discriminator: embedding,
convolutions of several widths with max-pooling over time, a highway layer, dropout, a
two-class output layer with an L2 penalty, Adam lr 1e-4) and target_lstm.py (the oracle LSTM,
whose parameters the paper draws from N(0, 1)).

The oracle is an LSTM language model with N(0, 1) weights over a 12-token vocabulary; it
samples the positive set once, under torch.no_grad(). Phase 1 pre-trains the generator by MLE
with its own Adam. Phase 2 pre-trains the discriminator on real batches against fresh generator
samples. Phase 3 alternates one policy-gradient generator update (samples and roll-out rewards
computed under torch.no_grad(), rewards a constant weight on the teacher-forced log-likelihood,
a second Adam) with discriminator updates. Every update runs zero_grad, backward, clipping
(generator only) and step. The oracle NLL of generator samples is printed as the test metric.
Bug: the teacher-forced unroll of the generator feeds the LSTM cell a detached carried state at
every step, so neither the MLE nor the policy-gradient loss back-propagates through time.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--vocab_size", type=int, default=12)
parser.add_argument("--seq_len", type=int, default=8)
parser.add_argument("--emb_dim", type=int, default=16)
parser.add_argument("--hidden_dim", type=int, default=16)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--num_real", type=int, default=256)
parser.add_argument("--pre_gen_steps", type=int, default=30)
parser.add_argument("--pre_dis_steps", type=int, default=10)
parser.add_argument("--adv_rounds", type=int, default=6)
parser.add_argument("--adv_dis_steps", type=int, default=2)
parser.add_argument("--rollout_num", type=int, default=4)
parser.add_argument("--gen_lr", type=float, default=0.01)
parser.add_argument("--dis_lr", type=float, default=1e-4)
parser.add_argument("--grad_clip", type=float, default=5.0)
parser.add_argument("--dis_l2", type=float, default=0.2)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

START_TOKEN = 0


class LSTMLanguageModel(nn.Module):
    """The generator G_theta (and, with N(0, 1) weights, the oracle)."""

    def __init__(self, vocab_size, emb_dim, hidden_dim, std):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.cell = nn.LSTMCell(emb_dim, hidden_dim)
        self.output = nn.Linear(hidden_dim, vocab_size)
        self.hidden_dim = hidden_dim
        for p in self.parameters():
            nn.init.normal_(p, 0.0, std)

    def init_state(self, n):
        h = torch.zeros(n, self.hidden_dim)
        return h, h.clone()

    def sample(self, n, seq_len, prefix=None):
        """Sample n sequences; the first prefix.size(1) tokens are given (roll-out)."""
        given = 0 if prefix is None else prefix.size(1)
        x_t = self.embedding(torch.full((n,), START_TOKEN, dtype=torch.long))
        h, c = self.init_state(n)
        tokens = []
        for t in range(seq_len):
            h, c = self.cell(x_t, (h, c))
            if t < given:
                token = prefix[:, t]
            else:
                probs = F.softmax(self.output(h), dim=-1)
                token = torch.multinomial(probs, 1).squeeze(1)
            tokens.append(token)
            x_t = self.embedding(token)
        return torch.stack(tokens, 1)

    def log_probs(self, x):
        """Teacher-forced log G(y_t | Y_1:t-1) for every step: (batch, seq_len, vocab)."""
        n, seq_len = x.shape
        start = torch.full((n, 1), START_TOKEN, dtype=torch.long)
        inputs = self.embedding(torch.cat([start, x[:, :-1]], 1))
        h, c = self.init_state(n)
        outputs = []
        for t in range(seq_len):
            h, c = self.cell(inputs[:, t], (h.detach(), c.detach()))
            outputs.append(self.output(h))
        return F.log_softmax(torch.stack(outputs, 1), dim=-1)


class Highway(nn.Module):
    def __init__(self, size, bias=0.0):
        super().__init__()
        self.lin = nn.Linear(size, size)
        self.gate = nn.Linear(size, size)
        self.bias = bias

    def forward(self, x):
        t = torch.sigmoid(self.gate(x) + self.bias)
        return t * F.relu(self.lin(x)) + (1.0 - t) * x


class Discriminator(nn.Module):
    def __init__(self, vocab_size, emb_dim, filter_sizes, num_filters, dropout):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        nn.init.uniform_(self.embedding.weight, -1.0, 1.0)
        self.convs = nn.ModuleList([nn.Conv1d(emb_dim, nf, fs)
                                    for fs, nf in zip(filter_sizes, num_filters)])
        for conv in self.convs:
            nn.init.trunc_normal_(conv.weight, std=0.1)
            nn.init.constant_(conv.bias, 0.1)
        total = sum(num_filters)
        self.highway = Highway(total)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(total, 2)
        nn.init.trunc_normal_(self.out.weight, std=0.1)
        nn.init.constant_(self.out.bias, 0.1)

    def forward(self, x):
        emb = self.embedding(x).transpose(1, 2)
        pooled = [F.relu(conv(emb)).max(dim=2)[0] for conv in self.convs]
        h = self.dropout(self.highway(torch.cat(pooled, 1)))
        return self.out(h)

    def l2_loss(self):
        return 0.5 * (self.out.weight.pow(2).sum() + self.out.bias.pow(2).sum())


def get_reward(generator, discriminator, samples, rollout_num):
    """Monte Carlo roll-out rewards Q(Y_1:t-1, y_t), averaged over rollout_num roll-outs."""
    n, seq_len = samples.shape
    discriminator.eval()
    rewards = torch.zeros(n, seq_len)
    with torch.no_grad():
        for _ in range(rollout_num):
            for given in range(1, seq_len):
                rolled = generator.sample(n, seq_len, prefix=samples[:, :given])
                rewards[:, given - 1] += F.softmax(discriminator(rolled), -1)[:, 1]
            rewards[:, seq_len - 1] += F.softmax(discriminator(samples), -1)[:, 1]
    discriminator.train()
    return rewards / rollout_num


def oracle_nll(oracle, generator, n=64):
    with torch.no_grad():
        samples = generator.sample(n, args.seq_len)
        logp = oracle.log_probs(samples)
        return F.nll_loss(logp.reshape(-1, args.vocab_size), samples.reshape(-1)).item()


def discriminator_step(discriminator, d_optimizer, real, generator):
    with torch.no_grad():
        fake = generator.sample(real.size(0), args.seq_len)
    x = torch.cat([real, fake], 0)
    y = torch.cat([torch.ones(real.size(0)), torch.zeros(fake.size(0))]).long()
    d_loss = F.cross_entropy(discriminator(x), y) + args.dis_l2 * discriminator.l2_loss()
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    return d_loss.item()


def real_batch():
    idx = torch.randint(0, args.num_real, (args.batch_size,))
    return real_data[idx]


oracle = LSTMLanguageModel(args.vocab_size, args.emb_dim, args.hidden_dim, std=1.0)
generator = LSTMLanguageModel(args.vocab_size, args.emb_dim, args.hidden_dim, std=0.1)
discriminator = Discriminator(args.vocab_size, emb_dim=16, filter_sizes=[2, 3, 4],
                              num_filters=[8, 8, 8], dropout=0.25)
with torch.no_grad():
    real_data = oracle.sample(args.num_real, args.seq_len)

# Phase 1: MLE pre-training of the generator.
pretrain_optimizer = torch.optim.Adam(generator.parameters(), lr=args.gen_lr)
print(f"initial oracle nll {oracle_nll(oracle, generator):.4f}")
for step in range(args.pre_gen_steps):
    x = real_batch()
    logp = generator.log_probs(x)
    mle_loss = F.nll_loss(logp.reshape(-1, args.vocab_size), x.reshape(-1))
    pretrain_optimizer.zero_grad()
    mle_loss.backward()
    torch.nn.utils.clip_grad_norm_(generator.parameters(), args.grad_clip)
    pretrain_optimizer.step()
    if step % 10 == 0 or step == args.pre_gen_steps - 1:
        print(f"pre-train step {step:3d} mle {mle_loss.item():.4f}")
print(f"after MLE oracle nll {oracle_nll(oracle, generator):.4f}")

# Phase 2: pre-training of the discriminator on real data against generator samples.
d_optimizer = torch.optim.Adam(discriminator.parameters(), lr=args.dis_lr)
for step in range(args.pre_dis_steps):
    d_loss = discriminator_step(discriminator, d_optimizer, real_batch(), generator)
print(f"discriminator pre-trained, loss {d_loss:.4f}")

# Phase 3: adversarial training, policy gradient for the generator.
g_optimizer = torch.optim.Adam(generator.parameters(), lr=args.gen_lr)
for total_batch in range(args.adv_rounds):
    with torch.no_grad():
        samples = generator.sample(args.batch_size, args.seq_len)
    rewards = get_reward(generator, discriminator, samples, args.rollout_num)
    logp = generator.log_probs(samples)
    token_logp = logp.gather(2, samples.unsqueeze(2)).squeeze(2)
    pg_loss = -(token_logp * rewards).sum()
    g_optimizer.zero_grad()
    pg_loss.backward()
    torch.nn.utils.clip_grad_norm_(generator.parameters(), args.grad_clip)
    g_optimizer.step()

    for _ in range(args.adv_dis_steps):
        d_loss = discriminator_step(discriminator, d_optimizer, real_batch(), generator)
    print(f"adv round {total_batch} pg {pg_loss.item():.3f} reward {rewards.mean().item():.4f} "
          f"d_loss {d_loss:.4f} oracle nll {oracle_nll(oracle, generator):.4f}")

if args.out:
    torch.save({"generator": generator.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
