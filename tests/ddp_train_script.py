"""Run by tests/test_train.py under `torchrun --nproc_per_node=2`: trains, then each process saves its weights."""
import os
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_train import classification_data, tiny_model  # noqa: E402

from minibert.training import TrainConfig, Trainer  # noqa: E402

out = Path(sys.argv[1])
torch.manual_seed(1)  # not even needed: DDP starts every process from process 0's weights
model = tiny_model(dropout=0.0)
config = TrainConfig(max_steps=3, batch_size=4, lr=1e-3, warmup_steps=1, progress=False, seed=3, device="cpu",
                     out_dir=str(out / "run"))
history = Trainer(model, config, classification_data(32), eval_data=classification_data(10, seed=9)).fit()
rank = os.environ["RANK"]
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out / f"rank{rank}.safetensors")
(out / f"eval{rank}.txt").write_text(str(history.last("eval_loss")))
