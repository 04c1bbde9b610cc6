"""The official evaluation on folders of users' meshes and point clouds, and its errors."""

import numpy as np
import pytest
import trimesh

from geomopt.shapes import _family as fam
from geomopt.shapes import _io


def _write_family(folder, shapes, suffix):
    folder.mkdir()
    for i, s in enumerate(shapes):
        fam.shape_mesh(s, 24).export(folder / f"pair0_step{i}{suffix}")


def test_identical_folders_score_zero_and_a_step_filter_applies(tmp_path):
    shapes = fam.random_shapes(4, 0)
    _write_family(tmp_path / "gen", shapes, ".obj")
    _write_family(tmp_path / "ref", shapes, ".off")
    m = _io.evaluate_folders(tmp_path / "gen", tmp_path / "ref", n_surface=2048, n_points=256)
    assert m["n_gen"] == m["n_ref"] == 4
    # the same meshes in two formats, sampled with the same seed: (nearly) zero distance
    assert m["CD"] < 1e-3 and m["COV"] == 1.0 and m["F@0.1"] == pytest.approx(1.0)
    only = _io.evaluate_folders(tmp_path / "gen", tmp_path / "ref", n_surface=2048, n_points=256,
                                step_filter="step[2-3]")  # fmt: skip
    assert only["n_gen"] == 2 and sorted(only["nearest"]) == ["pair0_step2.obj", "pair0_step3.obj"]


def test_point_clouds_npy_and_ply(tmp_path):
    rng = np.random.default_rng(0)
    pts = rng.standard_normal((300, 3))
    np.save(tmp_path / "a.npy", pts)
    trimesh.PointCloud(pts).export(tmp_path / "b.ply")
    np.testing.assert_allclose(_io.load_shape(tmp_path / "a.npy", n_points=256), pts)
    np.testing.assert_allclose(_io.load_shape(tmp_path / "b.ply", n_points=256), pts)


def test_bad_files_are_named(tmp_path):
    box = trimesh.creation.box()
    open_mesh = trimesh.Trimesh(box.vertices, box.faces[:-2])
    open_mesh.export(tmp_path / "open.obj")
    with pytest.raises(ValueError, match=r"open\.obj: mesh is not watertight"):
        _io.load_shape(tmp_path / "open.obj")
    np.save(tmp_path / "nan.npy", np.full((300, 3), np.nan))
    with pytest.raises(ValueError, match=r"nan\.npy: 300 non-finite points"):
        _io.load_shape(tmp_path / "nan.npy", n_points=10)
    np.save(tmp_path / "flat.npy", np.zeros((300, 2)))
    with pytest.raises(ValueError, match=r"flat\.npy: point array of shape \(300, 2\)"):
        _io.load_shape(tmp_path / "flat.npy", n_points=10)
    np.save(tmp_path / "few.npy", np.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"few\.npy: 5 points, expected at least"):
        _io.load_shape(tmp_path / "few.npy", n_points=10)
    (tmp_path / "junk.obj").write_text("this is not a mesh\n")
    with pytest.raises(ValueError, match=r"junk\.obj"):
        _io.load_shape(tmp_path / "junk.obj")
    with pytest.raises(ValueError, match="unsupported suffix"):
        _io.load_shape(tmp_path / "x.stl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no shape files"):
        _io.load_folder(tmp_path / "empty")
