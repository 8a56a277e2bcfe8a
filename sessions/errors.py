"""Domain errors. The API maps each to a JSON body {"detail", "code"} with its status."""


class DomainError(Exception):
    status = 422
    code = "invalid"

    def __init__(self, detail: str, code: str | None = None, status: int | None = None, **extra):
        super().__init__(detail)
        self.detail = detail
        if code:
            self.code = code
        if status:
            self.status = status
        self.extra = extra

    def as_dict(self) -> dict:
        return {"detail": self.detail, "code": self.code, **self.extra}


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class TooLarge(DomainError):
    status = 413
    code = "too_large"
