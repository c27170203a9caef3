"""How the operator runs an app in a cluster (image, resources, executors); ignored locally."""

from __future__ import annotations

import pydantic

from streamapp.runtime.manifest import base

__all__ = ["Deployment", "Executors"]


_Model = base.CamelModel


class Executors(_Model):
    min: int = pydantic.Field(default=1, ge=0, description="Fewest executors.")
    max: int = pydantic.Field(default=8, ge=1, description="Most executors.")
    cores_per_executor: int = pydantic.Field(default=1, ge=1, description="Cores per executor.")


class Deployment(_Model):
    image: str | None = pydantic.Field(default=None, description="Runtime image of driver and executors.")
    executors: Executors = pydantic.Field(default_factory=Executors, description="Executor bounds.")
    suspend: bool = pydantic.Field(default=False, description="Stop the driver, keep the checkpoint.")
