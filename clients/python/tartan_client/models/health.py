from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.health_details import HealthDetails


T = TypeVar("T", bound="Health")


@_attrs_define
class Health:
    """`GET /health`.

    Attributes:
        details (HealthDetails): What `GET /health` reports about the process (docs/durability.md,
            "Call slots").
        service (str):  Example: tartan.
        status (str):  Example: healthy.
    """

    details: HealthDetails
    service: str
    status: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        details = self.details.to_dict()

        service = self.service

        status = self.status

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "details": details,
                "service": service,
                "status": status,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.health_details import HealthDetails

        d = dict(src_dict)
        details = HealthDetails.from_dict(d.pop("details"))

        service = d.pop("service")

        status = d.pop("status")

        health = cls(
            details=details,
            service=service,
            status=status,
        )

        health.additional_properties = d
        return health

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
