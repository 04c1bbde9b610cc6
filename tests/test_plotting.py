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
    fig, axes = plotting.figure(3, 2)
    assert axes.shape == (2, 3)
    assert plotting.color("SGD") == plotting.color("sgd")
    assert plotting.color("some-new-method") == plotting.color("some-new-method")
    import matplotlib.pyplot as plt

    plt.close(fig)
