"""Initial responsibilities for EM: k-means++ seeding and the other starts."""

from __future__ import annotations

import math

import torch

__all__ = ["initial_responsibilities"]


def _kmeans_plusplus(X: torch.Tensor, n_clusters: int, weights: torch.Tensor,
                     generator: torch.Generator) -> torch.Tensor:
    """Greedy k-means++ seeding (Arthur & Vassilvitskii 2007; ``2 + ⌊log k⌋`` local trials,
    as in scikit-learn's ``kmeans_plusplus``), weighted by ``weights``. Returns indices (k,)."""
    n_trials = 2 + int(math.log(n_clusters))
    sq_norms = X.square().sum(1)

    def sqdist(idx: torch.Tensor) -> torch.Tensor:  # (len(idx), n)
        return (sq_norms[idx][:, None] - 2.0 * X[idx] @ X.T + sq_norms[None, :]).clamp_min(0)

    cpu_w = weights.to("cpu", torch.float64)
    first = torch.multinomial(cpu_w, 1, generator=generator).to(X.device)
    indices = [first]
    closest = sqdist(first)[0]
    for _ in range(1, n_clusters):
        probs = (weights * closest).to("cpu", torch.float64)
        if not probs.sum() > 0:  # all points coincide with centers: pick by weight
            probs = cpu_w
        cand = torch.multinomial(probs, n_trials, replacement=True, generator=generator)
        cand = cand.to(X.device)
        d2 = torch.minimum(closest[None, :], sqdist(cand))
        best = torch.argmin((d2 * weights).sum(1))
        closest = d2[best]
        indices.append(cand[best : best + 1])
    return torch.cat(indices)



def initial_responsibilities(X: torch.Tensor, n_components: int, init: str,
                             sample_weight: torch.Tensor, generator: torch.Generator
                             ) -> torch.Tensor:
    """Responsibilities (n_samples, n_components) that start EM, as in scikit-learn.

    ``"kmeans++"``: one-hot rows at ``k`` greedy k-means++ seeds (:func:`_kmeans_plusplus`);
    ``"kmeans"``: one-hot labels of :class:`sklearn.cluster.KMeans`; ``"random"``: uniform
    random rows normalized to sum to 1; ``"random_from_data"``: one-hot rows at ``k`` distinct
    random data points. Rows that are not seeds are all zeros (they do not enter the first
    M-step). The first M-step of these responsibilities gives the initial parameters.
    """
    n, k = X.shape[0], n_components
    resp = torch.zeros(n, k, dtype=X.dtype, device=X.device)
    if init == "kmeans":
        from sklearn.cluster import KMeans

        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
        labels = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(
            X.cpu().numpy(), sample_weight=sample_weight.cpu().numpy()).labels_
        resp[torch.arange(n), torch.as_tensor(labels, device=X.device)] = 1.0
    elif init == "random":
        resp = torch.rand(n, k, generator=generator, dtype=torch.float64).to(X)
        resp /= resp.sum(1, keepdim=True)
    elif init == "random_from_data":
        idx = torch.randperm(n, generator=generator)[:k].to(X.device)
        resp[idx, torch.arange(k, device=X.device)] = 1.0
    else:
        idx = _kmeans_plusplus(X, k, sample_weight, generator)
        resp[idx, torch.arange(k, device=X.device)] = 1.0
    return resp
