"""Fig. 1 drawn from data: embeddings on a circle, scaled by their attention weights, and the
ball B_r(s) that decides which selected tokens are distinguishable (Theorem 2's N_s)."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from attnlimits.gradient import softmax
from attnlimits.separability import distinguishable, min_pairwise_distance, separability


def fig1(rng: np.random.Generator) -> tuple[Figure, str, float]:
    """The three panels from ``rng``'s random points and logits, the caption, and N_s/N."""
    L, N = 12, 4
    angles = np.sort(rng.uniform(0, 2 * np.pi, L))
    x = np.stack([np.cos(angles), np.sin(angles)], axis=1)[None]  # (1, L, 2) on the unit circle
    alpha = softmax(rng.normal(0, 1.2, (1, L)))
    res = separability(alpha, x, n=N, delta=min_pairwise_distance(x), radius_m=1.0)
    # Eq. (10) from the core: the top-N mask, the selected tokens inside B_r(s), and r
    selected, distinct, radius = distinguishable(alpha, x, n=N)
    mask, inside, r = selected[0], distinct[0], float(radius[0])
    scaled = alpha[0][:, None] * x[0]
    s = scaled[mask].sum(axis=0)  # the context vector of the top-N set, for drawing

    fig, axes = plt.subplots(1, 3, figsize=(7.6, 3.0))
    circle = plt.Circle((0, 0), 1, fill=False, color="0.6", lw=0.8)
    ax = axes[0]
    ax.add_patch(circle)
    ax.scatter(*x[0][~mask].T, c="k", s=14, label="not selected")
    ax.scatter(*x[0][mask].T, c="m", marker="*", s=70, label=f"top-{N} selected")
    ax.set_title("embeddings x_i on the circle")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)
    lim = 1.15
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim))

    ax = axes[1]
    ax.scatter(*scaled[~mask].T, c="k", s=14)
    ax.scatter(*scaled[mask].T, c="m", marker="*", s=70)
    ax.scatter(*s, c="tab:blue", marker="X", s=50, label="context s")
    ax.set_title(r"scaled by weights: $\alpha_i x_i$")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)
    span = max(np.abs(scaled).max(), np.abs(s).max() + r) * 1.1
    ax.set(xlim=(-span, span), ylim=(-span, span))

    ax = axes[2]
    ax.add_patch(plt.Circle(s, r, color="tab:blue", alpha=0.15, lw=0))
    ax.scatter(*scaled[~mask].T, c="k", s=14, label="not selected (outside)")
    ax.scatter(*scaled[inside].T, c="m", marker="*", s=70, label="selected, inside $B_r(s)$")
    ax.scatter(
        *scaled[mask & ~inside].T,
        facecolors="none",
        edgecolors="m",
        marker="*",
        s=70,
        label="selected, outside",
    )
    ax.set_title(f"$B_r(s)$: $N_s/N$ = {res.ratio[0]:.2f}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)
    ax.set(xlim=(-span, span), ylim=(-span, span))
    for ax in axes:
        ax.set_aspect("equal")
        ax.tick_params(labelsize=7)
    caption = (
        f"Illustration with {L} seeded random points on the unit circle and softmax weights of seeded random logits; "
        f"r = min over non-selected i of ||s - alpha_i x_i|| = {r:.3f}. Not model data."
    )
    return fig, caption, float(res.ratio[0])
