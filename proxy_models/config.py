"""The shape of one proxy transformer and the size and compute numbers derived from it.

Counting conventions (they match the runs table in ``sweeper/study/runs.py``):

- ``n_params()`` is N, the non-embedding parameters: every matrix and norm gain inside the
  transformer blocks plus the final norm. Token and position embeddings and the unembedding
  (``lm_head``) matrix are excluded.
- ``n_params_total()`` counts every parameter the model holds, a tied matrix once.
- ``flops_per_token()`` is Kaplan's training compute per token, 6·N + 6·L·T·d (forward + backward,
  with the attention-score term), so that C = flops_per_token · D.
- ``deepseek_m()`` is DeepSeek LLM's M = 6·N + 12·L·d·T, non-embedding FLOPs per token (their
  72·L·d² is 6·N for blocks of 12·d² parameters; N here adds the norms' gains).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from proxy_models.rules import PARAMETRIZATIONS

__all__ = ["NORMS", "PARAMETRIZATIONS", "ProxyConfig"]

#: normalisation layers a proxy can use
NORMS: tuple[str, ...] = ("layernorm", "rmsnorm")


@dataclass(frozen=True)
class ProxyConfig:
    """A pre-LN GPT without biases: ``depth`` blocks of causal attention and a 4× GELU MLP.

    ``width`` is d_model. The number of heads is ``n_heads`` when given, else
    ``width // head_dim`` (heads grow with width at a fixed head size). ``base_width`` and
    ``base_depth`` are the shape at which muP / CompleteP coincide with SP; they are ignored under SP.
    ``output_mult`` (> 0) multiplies the logits under every parametrization, as microsoft/mup's
    ``MuReadout(output_mult=...)`` and Cerebras-GPT's ``output_logits_alpha``; 1.0 leaves them alone.
    """

    width: int = 64  # d_model
    depth: int = 2  # number of transformer blocks L
    n_heads: int | None = None  # None: width // head_dim
    head_dim: int = 16  # used only when n_heads is None
    context: int = 128  # sequence length T in tokens
    vocab_size: int = 256  # 256 = bytes
    norm: str = "layernorm"  # "layernorm" | "rmsnorm", both without bias
    qk_norm: bool = False  # normalise queries and keys per head (Wortsman et al.)
    tied_embeddings: bool = False  # lm_head shares the token-embedding matrix
    init_std: float = 0.02  # std of the normal init at the base shape
    output_mult: float = 1.0  # tunable factor on the logits, on top of the parametrization's
    parametrization: str = "sp"  # "sp" | "mup" | "completep"
    base_width: int = 64  # width at which muP equals SP
    base_depth: int = 2  # depth at which CompleteP equals muP

    def __post_init__(self) -> None:
        # numpy / pandas integers (e.g. from a ladder table) are accepted and stored as int
        for name in (
            "width",
            "depth",
            "n_heads",
            "head_dim",
            "context",
            "vocab_size",
            "base_width",
            "base_depth",
        ):
            value = getattr(self, name)
            if isinstance(value, numbers.Integral) and not isinstance(value, bool | int):
                object.__setattr__(self, name, int(value))
        for name in ("width", "depth", "head_dim", "context", "vocab_size", "base_width"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"`{name}` must be a positive integer, but got {name}={value!r}")
        if not isinstance(self.base_depth, int) or self.base_depth <= 0:
            raise ValueError(
                f"`base_depth` must be a positive integer, but got {self.base_depth!r}"
            )
        if self.n_heads is not None and (not isinstance(self.n_heads, int) or self.n_heads <= 0):
            raise ValueError(f"`n_heads` must be a positive integer, but got {self.n_heads!r}")
        if self.n_heads is None and self.width % self.head_dim != 0:
            raise ValueError(
                f"`width` must be divisible by `head_dim`, but got width={self.width}, "
                f"head_dim={self.head_dim}"
            )
        if self.n_heads is not None and self.width % self.n_heads != 0:
            raise ValueError(
                f"`width` must be divisible by the number of heads, but got width={self.width}, "
                f"n_heads={self.n_heads}"
            )
        if self.norm not in NORMS:
            raise ValueError(f"`norm` must be one of {NORMS}, but got {self.norm!r}")
        if self.parametrization not in PARAMETRIZATIONS:
            raise ValueError(
                f"`parametrization` must be one of {PARAMETRIZATIONS}, "
                f"but got {self.parametrization!r}"
            )
        if not self.init_std > 0:
            raise ValueError(f"`init_std` must be > 0, but got init_std={self.init_std!r}")
        if (
            not isinstance(self.output_mult, numbers.Real)
            or isinstance(self.output_mult, bool)
            or not (math.isfinite(self.output_mult) and self.output_mult > 0)
        ):
            raise ValueError(
                f"`output_mult` must be a finite number > 0, but got output_mult={self.output_mult!r}"
            )
        relative = self.parametrization != "sp"
        if relative and self.n_heads is not None and self.base_width % self.n_heads != 0:
            raise ValueError(
                f"`base_width` must be divisible by the number of heads, but got "
                f"base_width={self.base_width}, n_heads={self.n_heads}"
            )

    # ---- shape ---------------------------------------------------------------------------------
    @property
    def heads(self) -> int:
        """Number of attention heads."""
        return self.n_heads if self.n_heads is not None else self.width // self.head_dim

    @property
    def d_head(self) -> int:
        """Size of one attention head (``width // heads``)."""
        return self.width // self.heads

    @property
    def base_d_head(self) -> int:
        """Head size of the base model: heads fixed ⇒ base_width // heads, else ``head_dim``."""
        return self.base_width // self.n_heads if self.n_heads is not None else self.head_dim

    # ---- sizes ---------------------------------------------------------------------------------
    def n_params(self) -> int:
        """Non-embedding parameters N: block matrices and norm gains plus the final norm."""
        d = self.width
        matrices = 4 * d * d + 2 * (4 * d * d)  # q, k, v, out; MLP up and down
        norms = 2 * d + (2 * self.d_head if self.qk_norm else 0)  # both norms have a gain only
        return self.depth * (matrices + norms) + d

    def n_params_total(self) -> int:
        """Every parameter of the model: N, token and position embeddings, lm_head unless tied."""
        embeddings = self.vocab_size * self.width + self.context * self.width
        lm_head = 0 if self.tied_embeddings else self.vocab_size * self.width
        return self.n_params() + embeddings + lm_head

    # ---- compute -------------------------------------------------------------------------------
    def flops_per_token(self) -> float:
        """Training FLOPs per token (Kaplan): 6·N + 6·L·T·d, the last term for attention scores."""
        return 6.0 * self.n_params() + 6.0 * self.depth * self.context * self.width

    def deepseek_m(self) -> float:
        """DeepSeek LLM's non-embedding FLOPs per token M = 6·N + 12·L·d·T (72·L·d² for their
        blocks of 12·d² parameters)."""
        return 6.0 * self.n_params() + 12.0 * self.depth * self.width * self.context
