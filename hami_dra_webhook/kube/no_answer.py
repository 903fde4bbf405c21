"""A failed connection to kube-apiserver in plain words: what happened and where, never an
HTTP library's exception text (`ClientConnectorError: Cannot connect to host ...`)."""

from __future__ import annotations

import os
import ssl

import aiohttp
from kubernetes.aio.client.exceptions import ApiException

from hami_dra_webhook.kube.port import ApiError


def no_answer(error: BaseException) -> ApiError:
    """The ApiError (status 0) for an error of the transport; its message says what happened."""
    try:
        words = _words(error)
    except Exception:  # an error of a shape not foreseen: its own text, never a new failure
        words = str(error)[:300] or type(error).__name__
    return ApiError(0, type(error).__name__, words)


def _words(error: BaseException) -> str:
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        problem = error.certificate_error
        why = getattr(problem, "verify_message", "") or problem
        return (
            f"{_where(error)}: its certificate was not accepted ({why}); check the kubeconfig's"
            " certificate-authority-data"
        )
    if isinstance(error, aiohttp.ClientConnectorSSLError):
        return f"{_where(error)}: the TLS handshake failed ({_reason(error.os_error)})"
    if isinstance(error, ssl.SSLError):
        return f"the TLS handshake failed ({_reason(error)})"
    if isinstance(error, aiohttp.ClientConnectorError):
        number = error.os_error.errno
        cause = os.strerror(number) if number else str(error.os_error)
        return f"nothing answers at {_where(error)} ({cause.lower()})"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "the server closed the connection before it answered"
    if isinstance(error, aiohttp.ClientPayloadError):
        return "the answer was cut off"
    if isinstance(error, aiohttp.ClientOSError):
        return f"the connection failed ({(error.strerror or str(error)).lower()})"
    if isinstance(error, TimeoutError):
        return "no answer in time"
    return str(error)[:300] or type(error).__name__


def _where(error: aiohttp.ClientConnectorError) -> str:
    scheme = "http" if error.ssl is False else "https"
    return f"{scheme}://{error.host}:{error.port}"


def _reason(error: BaseException) -> str:
    """An SSL error's reason (`WRONG_VERSION_NUMBER`, `CERTIFICATE_VERIFY_FAILED`), else its
    text."""
    return str(getattr(error, "reason", "") or error)[:200]


def named(error: ApiError, method: str, host: str, path: str) -> ApiError:
    error.request = error.request or f"{method} {host}{path}"
    return error


def failure(error: Exception, timeout: float, request: str) -> ApiError:
    """The ApiError of a call that got no usable answer (aiohttp's refused and reset
    connections, TLS, DNS; the client's own errors; a timeout), naming the call."""
    if isinstance(error, ApiError):
        failed = error
    elif isinstance(error, ApiException):
        failed = ApiError(error.status or 0, "Unreachable", str(error.reason))
    elif isinstance(error, TimeoutError):
        failed = ApiError(0, "Timeout", f"no answer within {timeout:g}s")
    else:
        failed = no_answer(error)
    failed.request = failed.request or request
    return failed
