"""Procedural multimodal segmentation scenes with exact masks (the offline CoGaMiD demo).

Every class has 2-3 *modes*; a mode fixes a shape (disc, square, triangle, ring), a colour
and a texture (plain, horizontal / vertical stripes, checker). Objects of one class
therefore form several separate clusters of appearance, the situation in which a Gaussian
mixture of features should describe a class better than one prototype. Colours drift with
the incremental step: mode colour :math:`c_m + \\delta\\, t\\, u_m` (:math:`u_m` a fixed
random unit vector), clipped to [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch
from torch import Tensor

from ..protocol import background_shift_labels

__all__ = ["SceneConfig", "SceneGenerator"]

SHAPES = ("disc", "square", "triangle", "ring")
TEXTURES = ("plain", "hstripes", "vstripes", "checker")


@dataclass
class SceneConfig:
    """Scene parameters.

    Attributes
    ----------
    n_classes : int
        Object classes, labelled ``1..n_classes`` (0 is background).
    modes_per_class : tuple of int
        Allowed numbers of modes per class (drawn per class).
    image_size : int
        Square images of this side (pixels).
    max_objects : int
        1..max_objects objects per image.
    drift : float
        Colour drift per step (RGB units).
    noise : float
        Per-pixel Gaussian noise standard deviation.
    world_seed : int
        Seeds the class/mode definitions (the "world"), not the images.
    """

    n_classes: int = 6
    modes_per_class: tuple[int, ...] = (2, 3)
    image_size: int = 64
    max_objects: int = 3
    drift: float = 0.05
    noise: float = 0.04
    world_seed: int = 0
    min_size: float = field(default=0.18)
    max_size: float = field(default=0.32)

    def __post_init__(self) -> None:
        if self.n_classes < 1 or self.image_size < 8 or self.max_objects < 1:
            raise ValueError("need n_classes >= 1, image_size >= 8 and max_objects >= 1")
        if not self.modes_per_class or min(self.modes_per_class) < 1:
            raise ValueError("modes_per_class must hold positive integers, e.g. (2, 3)")
        if not 0 < self.min_size <= self.max_size < 1:
            raise ValueError("need 0 < min_size <= max_size < 1 (fractions of the image side)")


class SceneGenerator:
    """Draw images and their exact masks.

    Parameters
    ----------
    config : SceneConfig

    Attributes
    ----------
    modes : list of list of dict
        ``modes[c - 1]`` holds the modes of class ``c`` (shape, texture, colour, frequency).
    """

    def __init__(self, config: SceneConfig | None = None) -> None:
        self.config = config or SceneConfig()
        g = torch.Generator().manual_seed(self.config.world_seed)
        self.modes = []
        opts = self.config.modes_per_class
        for _ in range(self.config.n_classes):
            n = opts[int(torch.randint(len(opts), (1,), generator=g))]
            modes = []
            for _ in range(n):
                u = torch.randn(3, generator=g)
                modes.append(
                    {
                        "shape": SHAPES[int(torch.randint(len(SHAPES), (1,), generator=g))],
                        "texture": TEXTURES[int(torch.randint(len(TEXTURES), (1,), generator=g))],
                        "colour": 0.15 + 0.7 * torch.rand(3, generator=g),
                        "freq": float(3 + 5 * torch.rand(1, generator=g)),
                        "drift_dir": u / u.norm(),
                    }
                )
            self.modes.append(modes)

    def _shape_mask(self, shape: str, cy, cx, r, yy, xx) -> Tensor:
        dy, dx = yy - cy, xx - cx
        if shape == "disc":
            return dy**2 + dx**2 <= r**2
        if shape == "square":
            return (dy.abs() <= 0.85 * r) & (dx.abs() <= 0.85 * r)
        if shape == "ring":
            d2 = dy**2 + dx**2
            return (d2 <= r**2) & (d2 >= (0.55 * r) ** 2)
        # triangle pointing up: inside |dx| <= (dy + r) / 2 for -r <= dy <= r
        return (dy >= -r) & (dy <= r) & (dx.abs() <= 0.5 * (dy + r))

    def _texture(self, texture: str, freq: float, yy, xx) -> Tensor:
        s = self.config.image_size
        if texture == "plain":
            return torch.ones_like(yy)
        if texture == "hstripes":
            w = torch.sin(2 * torch.pi * freq * yy / s)
        elif texture == "vstripes":
            w = torch.sin(2 * torch.pi * freq * xx / s)
        else:
            w = torch.sin(2 * torch.pi * freq * yy / s) * torch.sin(2 * torch.pi * freq * xx / s)
        return 0.65 + 0.35 * torch.sign(w)

    def generate(
        self,
        n: int,
        step: int = 0,
        classes=None,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Draw ``n`` scenes.

        Parameters
        ----------
        n : int
        step : int
            Incremental step (sets the colour drift).
        classes : sequence of int, optional
            Classes objects are drawn from (default all). Every image holds at least one
            object of one of these classes.
        generator : torch.Generator, optional

        Returns
        -------
        images : Tensor, shape (n, 3, S, S), float in [0, 1]
        masks : Tensor, shape (n, S, S), long; 0 background, else the class of the pixel
            (later objects occlude earlier ones; the mask is the visible part).
        """
        cfg = self.config
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        classes = list(range(1, cfg.n_classes + 1)) if classes is None else list(classes)
        if not classes or min(classes) < 1 or max(classes) > cfg.n_classes:
            raise ValueError(f"classes must lie in 1..{cfg.n_classes}, got {classes}")
        s = cfg.image_size
        ar = torch.arange(s, dtype=torch.float32)
        yy, xx = torch.meshgrid(ar, ar, indexing="ij")
        images = torch.empty(n, 3, s, s)
        masks = torch.zeros(n, s, s, dtype=torch.long)
        for i in range(n):
            tint = 0.35 + 0.2 * torch.rand(3, generator=generator)
            img = tint.reshape(3, 1, 1) + 0.05 * torch.randn(3, s, s, generator=generator)
            n_obj = 1 + int(torch.randint(cfg.max_objects, (1,), generator=generator))
            for _ in range(n_obj):
                c = classes[int(torch.randint(len(classes), (1,), generator=generator))]
                modes = self.modes[c - 1]
                m = modes[int(torch.randint(len(modes), (1,), generator=generator))]
                frac = cfg.min_size + (cfg.max_size - cfg.min_size) * float(
                    torch.rand(1, generator=generator)
                )
                r = 0.5 * frac * s
                cy, cx = (r + (s - 2 * r) * torch.rand(2, generator=generator)).tolist()
                inside = self._shape_mask(m["shape"], cy, cx, r, yy, xx)
                colour = (m["colour"] + cfg.drift * step * m["drift_dir"]).clamp(0, 1)
                colour = (colour + 0.03 * torch.randn(3, generator=generator)).clamp(0, 1)
                tex = self._texture(m["texture"], m["freq"], yy, xx)
                obj = colour.reshape(3, 1, 1) * tex
                img = torch.where(inside, obj, img)
                masks[i][inside] = c
            img = img + cfg.noise * torch.randn(3, s, s, generator=generator)
            images[i] = img.clamp(0, 1)
        return images, masks


def _scene(value) -> SceneConfig:
    """A :class:`SceneConfig` from itself, a mapping or ``"key=value,..."``."""
    if isinstance(value, SceneConfig):
        return value
    if isinstance(value, str):
        items = {}
        for part in filter(None, (p.strip() for p in value.split(","))):
            key, sep, raw = part.partition("=")
            if not sep:
                raise ValueError(f"scene must be key=value pairs separated by commas, got {part!r}")
            items.setdefault(key.strip(), []).append(raw.strip())
        value = {k: v if len(v) > 1 else v[0] for k, v in items.items()}
    if not isinstance(value, dict):
        raise ValueError(f"scene must be a table of SceneConfig fields, got {value!r}")
    types = {f.name: f.type for f in fields(SceneConfig)}
    unknown = sorted(set(value) - set(types))
    if unknown:
        raise ValueError(f"scene: unknown field {unknown[0]!r}; valid fields: {', '.join(types)}")
    out = {}
    for k, v in value.items():
        try:
            if "tuple" in str(types[k]):
                parts = (
                    v.split(":")
                    if isinstance(v, str)
                    else (v if isinstance(v, list | tuple) else [v])
                )
                out[k] = tuple(int(p) for p in parts)
            elif types[k] in (int, "int"):
                out[k] = int(v)
            else:
                out[k] = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"scene: {k} must be a number, got {v!r}") from None
    try:
        return SceneConfig(**out)
    except ValueError as err:
        raise ValueError(f"scene: {err}") from None


def _gen(seed: int, step: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(1_000_003 * seed + 1009 * step + salt)


def _step_data(world: SceneGenerator, cfg, tasks, t: int):
    """Training images of step t: every image holds a class of step t; labels shifted."""
    seen = [c for task in tasks[: t + 1] for c in task]
    g = _gen(cfg.seed, t, 1)
    imgs, masks = [], []
    have = 0
    while have < cfg.n_train:
        x, m = world.generate(cfg.n_train, step=t, classes=seen, generator=g)
        ok = torch.stack([(m == c).flatten(1).any(1) for c in tasks[t]]).any(0)
        imgs.append(x[ok])
        masks.append(m[ok])
        have += int(ok.sum())
    x, m = torch.cat(imgs)[: cfg.n_train], torch.cat(masks)[: cfg.n_train]
    return x, background_shift_labels(m, tasks[t])
