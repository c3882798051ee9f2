"""``python lightning_ddp_fit.py``: fit the GAN that forgets its detach under Lightning's
``ddp_spawn`` strategy, two CPU processes on ``gloo``, with ``AuditCallback()``; prints the
exception that ``fit`` ends with (``test_lightning.py`` runs it, with a timeout)."""

from __future__ import annotations

import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from lightning.pytorch import Trainer
from lightning_modules import PoseGAN, loader

from toolkit.integrations.lightning import AuditCallback

if __name__ == "__main__":
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    trainer = Trainer(max_epochs=1, accelerator="cpu", devices=2, strategy="ddp_spawn",
                      logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=[AuditCallback()])
    try:
        trainer.fit(PoseGAN(detach_fake=False), loader(0))
    except Exception as err:  # ddp_spawn re-raises a process's error in the parent
        print(f"{type(err).__name__}: {err}")
    else:
        print("fit finished")
