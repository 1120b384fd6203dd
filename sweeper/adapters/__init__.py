"""Model builders for frameworks Sweeper does not depend on (optional extras).

Each module is a ``[model] builder`` for a study: ``sweeper.adapters.hf:llama`` (Hugging Face
transformers' Llama, extra ``hf``) and ``sweeper.adapters.litgpt:gpt`` (litgpt's GPT, extra
``litgpt``). They build a tiny model of the framework's own code from the cell's shape, so that a
ladder of them is the same kind of ladder as the built-in proxy's; the framework is imported only
when a builder is called. The two extras pin transformers versions that conflict (litgpt needs
transformers < 4.57): install each in its own virtualenv, ``bash scripts/adapter_venvs.sh``
(``.cache/adapter-venvs/{hf,litgpt}``, each overlaying the project's ``.venv``), or in a
virtualenv of yours, from the repository's root, ``pip install -e '.[hf]'`` or ``-e '.[litgpt]'``
(Sweeper is not on PyPI: ``pip install 'sweeper[hf]'`` elsewhere installs an unrelated package).
"""

from __future__ import annotations

import math

__all__ = ["mlp_width"]


def mlp_width(width: int, ratio: float, multiple_of: int) -> int:
    """The MLP's hidden size: ``ratio · width`` rounded up to a multiple of ``multiple_of``
    (Llama's rule, 8/3 for SwiGLU)."""
    return multiple_of * math.ceil(ratio * width / multiple_of)
