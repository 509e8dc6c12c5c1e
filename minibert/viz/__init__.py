"""Pictures: attention maps and lines, a few heads large (`plot_heads`), a widget explorer; bertviz's views
offline in `minibert.viz.bertviz`."""
from .attention import (AttentionExplorer, SentenceAttention, attention_for, check_index, check_text_fits,
                        plot_attention, plot_attention_grid, plot_attention_lines, stack_attentions)
from .head_panels import plot_heads
