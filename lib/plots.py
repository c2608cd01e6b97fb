"""Pictures used across the notebooks."""
import matplotlib.pyplot as plt


def plot_attention(weights, queries, keys, ax=None, title=None):
    """Heatmap of attention weights (T_q, T_k): one row per query token, one column per key token."""
    w = weights.detach().float().cpu()
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * len(keys) + 1.5, 0.6 * len(queries) + 1))
    im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(keys)), keys, rotation=45, ha="right")
    ax.set_yticks(range(len(queries)), queries)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center",
                    color="black" if w[i, j] > 0.5 else "white", fontsize=8)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, fraction=0.046)
    return ax
