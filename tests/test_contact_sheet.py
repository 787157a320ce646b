"""Labelled grids: every column gets its label drawn, cells are placed at the asked size."""

from __future__ import annotations

import numpy as np
import pytest

from studio_align.verticals.contact_sheet import contact_sheet


def test_sheet_draws_labels_above_the_cells_and_keeps_their_colour():
    red, blue = np.zeros((8, 8, 3)), np.zeros((8, 8, 3))
    red[..., 0], blue[..., 2] = 1.0, 1.0
    sheet = np.asarray(contact_sheet([[red, blue]], columns=["original", "tuned"], cell=40))
    assert sheet.shape[1] >= 2 * 40 and sheet.shape[0] >= 40
    # the cells sit at the bottom; above them, the label band holds dark text pixels
    cells = sheet[-46:-6]
    assert (cells[..., 0] == 255).any() and (cells[..., 2] == 255).any()
    band = sheet[: sheet.shape[0] - 46]
    assert (band.sum(-1) < 200).sum() > 20  # text ink, not a blank band


def test_row_labels_widen_the_sheet_and_mismatches_are_refused():
    img = np.full((4, 4, 3), 0.5)
    plain = contact_sheet([[img]], columns=["a"], cell=16)
    labelled = contact_sheet([[img]], columns=["a"], rows=["a long row label"], cell=16)
    assert labelled.width > plain.width
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        contact_sheet([[img]], columns=["a", "b"])
    with pytest.raises(ValueError, match="row labels"):
        contact_sheet([[img]], columns=["a"], rows=["x", "y"])


def test_flow_before_after_sheet_has_a_row_per_training_tag_set():
    from studio_align.verticals.flow.evaluate import TRAIN_TAG_SETS
    from studio_align.verticals.flow.experiment import before_after_sheet

    x = np.random.default_rng(0).uniform(size=(len(TRAIN_TAG_SETS), 2, 8, 8, 3))
    sheet = before_after_sheet(x, x[:, ::-1], "lumen")
    assert sheet.width > 4 * 96 and sheet.height > len(TRAIN_TAG_SETS) * 96
