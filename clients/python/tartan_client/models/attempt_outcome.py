from enum import StrEnum


class AttemptOutcome(StrEnum):
    ABANDONED = "abandoned"
    CANCELLED = "cancelled"
    PERMANENT = "permanent"
    RETRYABLE = "retryable"
    SUCCESS = "success"
    TIMEOUT = "timeout"

    def __str__(self) -> str:
        return str(self.value)
