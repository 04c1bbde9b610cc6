import numpy as np

from geomopt import plotting


def test_save_writes_png_and_pdf(tmp_path):
    fig, ax = plotting.figure()
    ax.plot(np.arange(5), np.arange(5) ** 2, color=plotting.color("signsgd"))
    out = plotting.save(fig, tmp_path / "sub" / "fig", pdf=True)
    assert out == tmp_path / "sub" / "fig.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "sub" / "fig.pdf").read_bytes()[:4] == b"%PDF"


def test_grid_of_axes_and_stable_colours():
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt

    fig, axes = plotting.figure(3, 2)
    assert axes.shape == (2, 3)
    plt.close(fig)
    assert plotting.color("SGD") == plotting.color("sgd") == "#1f77b4"
    # methods compared in one figure get different colours
    assert len({plotting.color(m) for m in ("sgd", "signsgd", "signum", "muon", "adamw")}) == 5
    assert len({plotting.color(m) for m in ("hilbert", "lex", "morton")}) == 3
    # an unknown name gets a valid colour from the palette, the same in a fresh process
    new = plotting.color("some-new-method")
    assert mcolors.is_color_like(new) and new in plotting._PALETTE
