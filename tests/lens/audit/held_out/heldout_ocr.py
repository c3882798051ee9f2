"""OCR: scene-text recognition with a learned rectification in front of a CTC recognizer.

Written from clovaai/deep-text-recognition-benchmark modules/transformation.py@c2e28f5c0d30a81e
884d358d0874c7a712e7515b (the TPS spatial transformer: a localization network predicts the
fiducial points, a grid is built from them and the image is resampled by bilinear
F.grid_sample) with an affine grid in place of the thin-plate spline, and a CTC loss on a small
convolutional-recurrent recognizer as the repository's CTC option trains it. The text is ours.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

SOURCE = ("clovaai/deep-text-recognition-benchmark modules/transformation.py@"
          "c2e28f5c0d30a81e884d358d0874c7a712e7515b")
CONFIRMS = ("https://github.com/clovaai/deep-text-recognition-benchmark/blob/c2e28f5c0d30a81e884d"
            "358d0874c7a712e7515b/modules/transformation.py")


class Recognizer(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.rnn = nn.GRU(4 * 4, 6, batch_first=True, bidirectional=True)
        self.out = nn.Linear(12, classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv(image))  # (B, 4, 4, W)
        seq = h.permute(0, 3, 1, 2).flatten(2)  # (B, W, 16)
        return self.out(self.rnn(seq)[0])


# The bug: the rectified image is resampled with mode="nearest" instead of bilinear: the
# sampled values do not depend on the grid's position within a pixel, so the localization
# network's gradient is exactly zero (truth "dead").
def ocr_rectifier(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    height, width, classes = 4, 8, 5
    localization = nn.Sequential(nn.Flatten(), nn.Linear(height * width, 6))
    recognizer = Recognizer(classes)
    optimizer = torch.optim.Adam([*localization.parameters(), *recognizer.parameters()], lr=1e-3)

    def rectify(image: torch.Tensor) -> torch.Tensor:
        theta = localization(image).view(-1, 2, 3) + torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])
        grid = F.affine_grid(theta, list(image.shape), align_corners=False)
        mode = "nearest" if bug else "bilinear"
        return F.grid_sample(image, grid, mode=mode, align_corners=False)

    def step() -> torch.Tensor:
        image = torch.rand(2, 1, height, width, generator=gen)
        log_probs = recognizer(rectify(image)).log_softmax(2).permute(1, 0, 2)
        targets = torch.randint(1, classes, (2, 3), generator=gen)
        return F.ctc_loss(log_probs, targets, torch.full((2,), width), torch.full((2,), 3))

    return RealCase("ocr_rectifier_nearest" if bug else "ocr_rectifier", SOURCE, CONFIRMS,
                    "dead" if bug else "correct", step, optimizer,
                    {"localization": localization, "recognizer": recognizer})


CASES = {"ocr_rectifier": ocr_rectifier,
         "ocr_rectifier_nearest": lambda seed: ocr_rectifier(seed, bug=True)}
TWINS = {"ocr_rectifier_nearest": "ocr_rectifier"}
FIELD = "OCR (text recognition, CTC)"
