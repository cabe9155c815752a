from enum import StrEnum


class WorkStatus(StrEnum):
    ACTIVE = "active"
    CANCELLED = "cancelled"
    COMPENSATED = "compensated"
    COMPENSATING = "compensating"
    COMPENSATION_FAILED = "compensation_failed"
    FAILED = "failed"
    NOT_COMPLETED = "not_completed"
    PARKED = "parked"
    PENDING = "pending"
    SKIPPED = "skipped"
    SUCCEEDED = "succeeded"

    def __str__(self) -> str:
        return str(self.value)
