from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="BulkDryRun")


@_attrs_define
class BulkDryRun:
    """A bulk request's dry run: how many flows it would act on now.

    Attributes:
        dry_run (bool):
        kind (str):  Example: retry.
        matched (int):
    """

    dry_run: bool
    kind: str
    matched: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dry_run = self.dry_run

        kind = self.kind

        matched = self.matched

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dry_run": dry_run,
                "kind": kind,
                "matched": matched,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        dry_run = d.pop("dry_run")

        kind = d.pop("kind")

        matched = d.pop("matched")

        bulk_dry_run = cls(
            dry_run=dry_run,
            kind=kind,
            matched=matched,
        )

        bulk_dry_run.additional_properties = d
        return bulk_dry_run

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
