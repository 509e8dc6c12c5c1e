"""After BERT: smaller and faster models by distillation, head pruning and int8 quantization."""
