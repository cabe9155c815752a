from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.catalog_state_attributes import CatalogStateAttributes
    from ..models.catalog_state_steps import CatalogStateSteps
    from ..models.engine_state_health import EngineStateHealth


T = TypeVar("T", bound="EngineState")


@_attrs_define
class EngineState:
    """The catalog with the health of its steps, by node (Argyll's shape).

    Attributes:
        attributes (CatalogStateAttributes):
        steps (CatalogStateSteps):
        health (EngineStateHealth):
        last_updated (datetime.datetime | None | Unset):
    """

    attributes: CatalogStateAttributes
    steps: CatalogStateSteps
    health: EngineStateHealth
    last_updated: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        attributes = self.attributes.to_dict()

        steps = self.steps.to_dict()

        health = self.health.to_dict()

        last_updated: None | str | Unset
        if isinstance(self.last_updated, Unset):
            last_updated = UNSET
        elif isinstance(self.last_updated, datetime.datetime):
            last_updated = self.last_updated.isoformat()
        else:
            last_updated = self.last_updated

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attributes": attributes,
                "steps": steps,
                "health": health,
            }
        )
        if last_updated is not UNSET:
            field_dict["last_updated"] = last_updated

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.catalog_state_attributes import CatalogStateAttributes
        from ..models.catalog_state_steps import CatalogStateSteps
        from ..models.engine_state_health import EngineStateHealth

        d = dict(src_dict)
        attributes = CatalogStateAttributes.from_dict(d.pop("attributes"))

        steps = CatalogStateSteps.from_dict(d.pop("steps"))

        health = EngineStateHealth.from_dict(d.pop("health"))

        def _parse_last_updated(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_updated_type_0 = datetime.datetime.fromisoformat(data)

                return last_updated_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_updated = _parse_last_updated(d.pop("last_updated", UNSET))

        engine_state = cls(
            attributes=attributes,
            steps=steps,
            health=health,
            last_updated=last_updated,
        )

        engine_state.additional_properties = d
        return engine_state

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
