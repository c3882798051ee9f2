"""audit_step on the gradient a correct step computes and throws away, and on writes that only
constrain what an optimizer stepped: information, never a failure, and never hiding a leak.

Each rule is checked against real ``backward()``: the tensors the audit calls pass-through do
receive ``.grad`` from the loss (so they are reached), and the leaks it keeps are ones a cut in
the step's own code removes.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from toolkit import audit_step


def _grads(loss: torch.Tensor, modules: dict[str, nn.Module]) -> set[str]:
    """Names of the parameters of ``modules`` that a real backward of ``loss`` reaches."""
    params = {f"{k}.{n}": p for k, m in modules.items() for n, p in m.named_parameters()}
    for p in params.values():
        p.grad = None
    loss.backward()
    found = {n for n, p in params.items() if p.grad is not None}
    for p in params.values():
        p.grad = None
    return found


class Critic(nn.Module):
    """DDPG's critic (Lillicrap et al. 2016, section 7): the action enters at the second layer,
    so the first layer sees the state only."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(3, 6), nn.Linear(6 + 1, 5), nn.Linear(5, 1)

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.l1(state))
        return self.l3(F.relu(self.l2(torch.cat([h, action], 1))))


def test_a_critic_layer_that_sees_only_the_state_is_pass_through_in_the_actor_step() -> None:
    torch.manual_seed(0)
    actor, critic = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), Critic()
    opts = {"actor": torch.optim.Adam(actor.parameters()),
            "critic": torch.optim.Adam(critic.parameters())}
    state, action, target = torch.randn(4, 3), torch.randn(4, 1), torch.randn(4, 1)

    def step() -> dict[str, torch.Tensor]:
        return {"critic": F.mse_loss(critic(state, action), target),
                "actor": -critic(state, actor(state)).mean()}

    audit = audit_step(step, opts)
    assert audit.ok, str(audit)
    passing = {x.parameter: x for x in audit.pass_through}
    assert set(passing) == {f"critic.{n}" for n, _ in critic.named_parameters()}
    assert "only through the output of critic" in passing["critic.l1.weight"].fix
    assert "no cut can remove it" in passing["critic.l3.weight"].fix
    oracle = _grads(step()["actor"], {"actor": actor, "critic": critic})
    assert oracle - {f"actor.{n}" for n, _ in actor.named_parameters()} == set(passing)
    strict = audit_step(step, opts, allow_pass_through=False)
    assert {x.parameter for x in strict.leaks} == set(passing)


def test_a_projection_discriminators_class_embedding_is_pass_through_in_the_generator_step(
) -> None:
    # Miyato & Koyama 2018: D(x, y) = psi(phi(x)) + <embed(y), phi(x)>; the embedding is a
    # branch the generator's gradient never crosses, inside the discriminator's own forward
    class Projection(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.phi, self.psi, self.embed = nn.Linear(2, 4), nn.Linear(4, 1), nn.Embedding(3, 4)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            h = F.relu(self.phi(x))
            return self.psi(h).squeeze(1) + (self.embed(y) * h).sum(1)

    torch.manual_seed(1)
    generator, discriminator = nn.Linear(3, 2), Projection()
    opt_g = torch.optim.Adam(generator.parameters())
    z, y = torch.randn(5, 3), torch.randint(0, 3, (5,))

    audit = audit_step(lambda: F.softplus(-discriminator(generator(z), y)).mean(), opt_g)
    assert audit.ok, str(audit)
    assert {"discriminator.embed.weight", "discriminator.phi.weight"} <= {
        x.parameter for x in audit.pass_through}


def test_a_wrapper_that_holds_the_stepped_tensors_hides_no_leak() -> None:
    # one module runs D(G(z)) for both steps; its discriminator step trains the generator
    class GAN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.G, self.D = nn.Linear(3, 2), nn.Sequential(nn.Linear(2, 4), nn.ReLU(),
                                                            nn.Linear(4, 1))

        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return self.D(self.G(z))

    torch.manual_seed(2)
    gan = GAN()
    opt_d = torch.optim.Adam(gan.D.parameters())
    z = torch.randn(5, 3)
    audit = audit_step(lambda: F.softplus(gan(z)).mean(), opt_d)
    assert not audit.ok
    assert {x.parameter for x in audit.leaks} == {"gan.G.weight", "gan.G.bias"}
    assert {x.cut_at for x in audit.leaks} == {"the output of gan.G (shape (5, 2))"}


def test_a_backbone_outside_the_optimizer_that_requires_grad_stays_a_leak() -> None:
    # a linear probe that forgot requires_grad_(False) on its backbone: the model's output
    # carries the stepped head's gradient, but the model holds the head, so no pass-through
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    opt = torch.optim.SGD(model[2].parameters(), lr=0.1)
    x, y = torch.randn(5, 4), torch.randint(0, 2, (5,))
    audit = audit_step(lambda: F.cross_entropy(model(x), y), opt)
    assert {x.parameter for x in audit.leaks} == {"model.0.weight", "model.0.bias"}
    assert not audit.pass_through


def test_weight_clipping_and_a_pruning_mask_constrain_what_the_optimizer_steps() -> None:
    # WGAN (Arjovsky et al. 2017, Algorithm 1) clamps the critic after every step; a pruning
    # mask multiplies a stepped weight by a buffer: neither is a second update
    torch.manual_seed(4)
    critic = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    critic.register_buffer("mask", (torch.rand(4, 2) > 0.5).float())
    opt = torch.optim.RMSprop(critic.parameters(), lr=5e-5)
    real, fake = torch.randn(6, 2), torch.randn(6, 2)

    def step() -> torch.Tensor:
        for p in critic.parameters():
            p.data.clamp_(-0.01, 0.01)
        critic[0].weight.data.mul_(critic.mask)
        return -critic(real).mean() + critic(fake).mean()

    audit = audit_step(step, opt)
    assert audit.ok, str(audit)
    notes = [n for n in audit.notes if "a constraint on the stepped values" in n]
    assert any("critic.0.bias, critic.2.weight, critic.2.bias" in n and "(clamp_)" in n
               for n in notes), notes
    assert any("critic.0.weight" in n and "critic.mask" in n for n in notes), notes


def test_an_ema_read_does_not_explain_a_parameter_whose_output_is_thrown_away() -> None:
    # BYOL with hidden_layer="avgpool": the backbone's fc runs, its output is dropped by the
    # hook that takes the pooled features, and the EMA reads fc's .data for the target copy
    torch.manual_seed(5)
    body, fc, target = nn.Linear(3, 4), nn.Linear(4, 2), nn.Linear(4, 2)
    target.requires_grad_(False)
    opt = torch.optim.SGD([*body.parameters(), *fc.parameters()], lr=0.1)
    x = torch.randn(5, 3)

    def step() -> torch.Tensor:
        for t, p in zip(target.parameters(), fc.parameters()):
            t.data = 0.99 * t.data + 0.01 * p.data
        features = body(x)
        fc(features)  # the classifier runs; nothing reads its output
        return features.pow(2).mean()

    audit = audit_step(step, opt)
    assert {d.parameter for d in audit.dead} == {"fc.weight", "fc.bias"}
    assert all(d.kind == "no_graph" and ".data" not in d.cut for d in audit.dead), str(audit)
