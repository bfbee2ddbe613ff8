"""The CEL environment of the emulator: cel-expr-python plus Kubernetes' CEL libraries.

cel-expr-python (Google's cel-cpp, type-checked at compile time like kube-apiserver's cel-go)
brings the standard library and the strings, optional and math extensions. Kubernetes adds
libraries of its own; this module declares the parts operators use: lists (``isSorted``,
``sum``, ``min``, ``max``; not ``indexOf``/``lastIndexOf`` on lists, whose names the strings
extension holds), regex (``find``, ``findAll``),
``isURL``, ``isIP``, ``isCIDR``, quantities (``quantity``, ``isQuantity``, ``compareTo``,
``isLessThan``, ``isGreaterThan``, ``asInteger``, ``asApproximateFloat``, ``isInteger``,
``sign``; a quantity is a one-key map here), ``sets.contains``/``equivalent``/``intersects``,
and the IP, CIDR and URL objects: ``ip()`` (``family``, ``isUnspecified``, ``isLoopback``,
``isLinkLocalMulticast``, ``isLinkLocalUnicast``, ``isGlobalUnicast``), ``cidr()``
(``containsIP``, ``containsCIDR``, ``ip``, ``masked``, ``prefixLength``) and ``url()``
(``getScheme``, ``getHost``, ``getHostname``, ``getPort``, ``getEscapedPath``, ``getQuery``),
also one-key maps, so they type-check as loosely as quantities (not ``string(ip)``).
A rule calling anything else fails to compile, so its CRD is refused, never half-checked.

cel-expr-python is an optional dependency (the ``testing`` extra): ``environment`` raises
``CelUnavailable`` without it.
"""

from __future__ import annotations

import decimal
import ipaddress
import itertools
import re
import threading
import urllib.parse
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["CelUnavailable", "environment", "error_text", "typed_environment"]

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_KEY = "__quantity__"
_lock = threading.Lock()


class CelUnavailable(RuntimeError):
    """cel-expr-python is not installed."""


def _parse_quantity(text: str) -> decimal.Decimal | None:
    match = _QUANTITY.match(text)
    if match is None:
        return None
    number, suffix = decimal.Decimal(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    return number.scaleb(int(suffix[1:]))


def _quantity(text: str) -> dict[str, str]:
    value = _parse_quantity(text)
    if value is None:
        raise ValueError(f"quantities must match the regular expression '{_QUANTITY.pattern}'")
    return {_KEY: str(value)}


def _q(value: dict[str, Any]) -> decimal.Decimal:
    return decimal.Decimal(str(value[_KEY]))


def _compare(a: dict[str, Any], b: dict[str, Any]) -> int:
    return (_q(a) > _q(b)) - (_q(a) < _q(b))


def _as_integer(value: dict[str, Any]) -> int:
    number = _q(value)
    if number != number.to_integral_value() or abs(number) >= 2**63:
        raise ValueError("cannot convert value to integer")
    return int(number)


def _is_url(text: str) -> bool:
    parsed = urllib.parse.urlsplit(text)
    return bool(parsed.scheme) and (bool(parsed.netloc) or text.startswith("/"))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return "%" not in text


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


def _find(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return match.group(0) if match else ""


_IP, _CIDR, _URL = "__ip__", "__cidr__", "__url__"


def _ip(text: str) -> dict[str, str]:
    try:
        address = ipaddress.ip_address(text)
    except ValueError as exc:
        message = f'IP Address "{text}" parse error during conversion from string: {exc}'
        raise ValueError(message) from exc
    if "%" in text or (isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped):
        raise ValueError(f'IP Address "{text}" parse error during conversion from string')
    return {_IP: str(address)}


def _cidr(text: str) -> dict[str, str]:
    if "/" not in text:
        raise ValueError(f"network address parse error during conversion from string: {text}")
    try:
        network = ipaddress.ip_interface(text)
    except ValueError as exc:
        message = f"network address parse error during conversion from string: {exc}"
        raise ValueError(message) from exc
    return {_CIDR: str(network)}


def _net(value: dict[str, Any]) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    return ipaddress.ip_interface(str(value[_CIDR]))


def _contains_ip(cidr: dict[str, Any], other: Any) -> bool:
    address = ipaddress.ip_address(str(other[_IP]) if isinstance(other, dict) else _ip(other)[_IP])
    return address in _net(cidr).network


def _contains_cidr(cidr: dict[str, Any], other: Any) -> bool:
    inner = _net(other if isinstance(other, dict) else _cidr(other)).network
    outer = _net(cidr).network
    return inner.version == outer.version and inner.subnet_of(outer)  # type: ignore[arg-type]


def _url(text: str) -> dict[str, str]:
    if not _is_url(text):
        raise ValueError(f"URL parse error during conversion from string: {text}")
    return {_URL: text}


def _split(value: dict[str, Any]) -> urllib.parse.SplitResult:
    return urllib.parse.urlsplit(str(value[_URL]))


def _host(value: dict[str, Any]) -> tuple[str, str]:
    """A URL's hostname (IPv6 without brackets) and port, as Go's url.URL gives them."""
    host = _split(value).netloc.rsplit("@", 1)[-1]
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        return name, rest.removeprefix(":")
    name, _, port = host.partition(":")
    return name, port


def _address(value: dict[str, Any]) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(str(value[_IP]))


def _global_unicast(value: dict[str, Any]) -> bool:
    """Go's net.IP.IsGlobalUnicast: private ranges count, unlike Python's is_global."""
    a = _address(value)
    broadcast = a == ipaddress.ip_address("255.255.255.255")
    return not (a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local or broadcast)


def _link_local_multicast(value: dict[str, Any]) -> bool:
    a = _address(value)
    scope = "224.0.0.0/24" if a.version == 4 else "ff02::/16"
    return a in ipaddress.ip_network(scope)


def _network_declarations(cel: Any, obj: Any) -> list[Any]:
    """Kubernetes' IP, CIDR and URL libraries; their objects are one-key maps here."""
    t = cel.Type

    def member(name: str, ret: Any, impl: Callable[..., Any], *more: Any) -> Any:
        overload = cel.Overload(f"k8s_{name}_{len(more)}", ret, [obj, *more], True, impl)
        return cel.FunctionDecl(name, [overload])

    ip_overloads = [
        cel.Overload("k8s_ip_string", obj, [t.STRING], False, _ip),
        cel.Overload("k8s_cidr_ip", obj, [obj], True, lambda c: {_IP: str(_net(c).ip)}),
    ]
    contains_ip = [
        cel.Overload("k8s_contains_ip_string", t.BOOL, [obj, t.STRING], True, _contains_ip),
        cel.Overload("k8s_contains_ip_ip", t.BOOL, [obj, obj], True, _contains_ip),
    ]
    contains_cidr = [
        cel.Overload("k8s_contains_cidr_string", t.BOOL, [obj, t.STRING], True, _contains_cidr),
        cel.Overload("k8s_contains_cidr_cidr", t.BOOL, [obj, obj], True, _contains_cidr),
    ]
    return [
        cel.FunctionDecl("ip", ip_overloads),
        cel.FunctionDecl("cidr", [cel.Overload("k8s_cidr", obj, [t.STRING], False, _cidr)]),
        cel.FunctionDecl("url", [cel.Overload("k8s_url", obj, [t.STRING], False, _url)]),
        cel.FunctionDecl("containsIP", contains_ip),
        cel.FunctionDecl("containsCIDR", contains_cidr),
        member("family", t.INT, lambda v: _address(v).version),
        member("isUnspecified", t.BOOL, lambda v: _address(v).is_unspecified),
        member("isLoopback", t.BOOL, lambda v: _address(v).is_loopback),
        member("isLinkLocalMulticast", t.BOOL, _link_local_multicast),
        member("isLinkLocalUnicast", t.BOOL, lambda v: _address(v).is_link_local),
        member("isGlobalUnicast", t.BOOL, _global_unicast),
        member("masked", obj, lambda c: {_CIDR: str(_net(c).network)}),
        member("prefixLength", t.INT, lambda c: _net(c).network.prefixlen),
        member("getScheme", t.STRING, lambda u: _split(u).scheme),
        member("getHost", t.STRING, lambda u: _split(u).netloc.rsplit("@", 1)[-1]),
        member("getHostname", t.STRING, lambda u: _host(u)[0]),
        member("getPort", t.STRING, lambda u: _host(u)[1]),
        member("getEscapedPath", t.STRING, lambda u: _split(u).path),
        member(
            "getQuery",
            t.Map(t.STRING, t.List(t.STRING)),
            lambda u: urllib.parse.parse_qs(_split(u).query, keep_blank_values=True),
        ),
    ]


def _declarations(cel: Any) -> list[Any]:
    t = cel.Type
    dyn_list, qty = t.List(t.DYN), t.Map(t.STRING, t.DYN)

    def member(name: str, ret: Any, params: list[Any], impl: Callable[..., Any]) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(f"k8s_{name}", ret, params, True, impl)])

    def call(name: str, ret: Any, params: list[Any], impl: Callable[..., Any]) -> Any:
        overload = f"k8s_{name.replace('.', '_')}"
        return cel.FunctionDecl(name, [cel.Overload(overload, ret, params, False, impl)])

    return [
        member(
            "isSorted",
            t.BOOL,
            [dyn_list],
            lambda xs: all(a <= b for a, b in itertools.pairwise(xs)),
        ),
        member("sum", t.DYN, [dyn_list], lambda xs: sum(xs)),
        member("min", t.DYN, [dyn_list], min),
        member("max", t.DYN, [dyn_list], max),
        member("find", t.STRING, [t.STRING, t.STRING], _find),
        member("findAll", t.List(t.STRING), [t.STRING, t.STRING], lambda s, p: re.findall(p, s)),
        call("isURL", t.BOOL, [t.STRING], _is_url),
        call("isIP", t.BOOL, [t.STRING], _is_ip),
        call("isCIDR", t.BOOL, [t.STRING], _is_cidr),
        call("isQuantity", t.BOOL, [t.STRING], lambda s: _parse_quantity(s) is not None),
        call("quantity", qty, [t.STRING], _quantity),
        member("compareTo", t.INT, [qty, qty], _compare),
        member("isLessThan", t.BOOL, [qty, qty], lambda a, b: _compare(a, b) < 0),
        member("isGreaterThan", t.BOOL, [qty, qty], lambda a, b: _compare(a, b) > 0),
        member("asInteger", t.INT, [qty], _as_integer),
        member("asApproximateFloat", t.DOUBLE, [qty], lambda q: float(_q(q))),
        member("isInteger", t.BOOL, [qty], lambda q: _q(q) == _q(q).to_integral_value()),
        member("sign", t.INT, [qty], lambda q: (_q(q) > 0) - (_q(q) < 0)),
        call("sets.contains", t.BOOL, [dyn_list, dyn_list], lambda a, b: all(x in a for x in b)),
        call(
            "sets.equivalent",
            t.BOOL,
            [dyn_list, dyn_list],
            lambda a, b: all(x in a for x in b) and all(x in b for x in a),
        ),
        call("sets.intersects", t.BOOL, [dyn_list, dyn_list], lambda a, b: any(x in a for x in b)),
        *_network_declarations(cel, qty),
    ]


@lru_cache(maxsize=8)
def environment(self_type: str) -> Any:
    """A compiled-rule environment where ``self``/``oldSelf`` have the type ``self_type``
    (``dyn``, ``timestamp`` or ``duration``, as kube-apiserver types string formats), or
    ``optional-old`` (``self``, ``__old``, ``__hasOld``: an ``optionalOldSelf`` rule), or,
    for ``policy``, a ValidatingAdmissionPolicy's (``object``, ``oldObject``, ``request``,
    ``params``, ``namespaceObject``, ``variables``)."""
    cel = _cel()
    kinds = {"dyn": cel.Type.DYN, "timestamp": cel.Type.TIMESTAMP, "duration": cel.Type.DURATION}
    if self_type == "policy":  # ValidatingAdmissionPolicy expressions
        names = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
        return typed_environment({name: cel.Type.DYN for name in names})
    if self_type == "optional-old":  # see cel_rules: oldSelf bound to an optional value
        variables = {"self": cel.Type.DYN, "__old": cel.Type.DYN, "__hasOld": cel.Type.BOOL}
        return typed_environment(variables)
    return typed_environment({"self": kinds[self_type], "oldSelf": kinds[self_type]})


def _cel() -> Any:
    try:
        from cel_expr_python import cel
    except ImportError as exc:
        raise CelUnavailable(
            "the emulator evaluates x-kubernetes-validations with cel-expr-python: "
            "pip install 'cloudcoil-sync[testing]'"
        ) from exc
    return cel


def typed_environment(variables: dict[str, Any], pool: Any = None) -> Any:
    """An environment with Kubernetes' libraries, ``variables`` (name -> CEL type) and the
    protobuf descriptor ``pool`` that declares their message types."""
    cel = _cel()
    from cel_expr_python.ext import ext_bindings, ext_math, ext_optional, ext_strings

    extensions = [ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_math.ExtMath()]
    extensions.append(ext_bindings.ExtBindings())  # cel.bind, as Kubernetes has it
    with _lock:
        return cel.NewEnv(
            descriptor_pool=pool,
            variables=variables,
            extensions=extensions,
            functions=_declarations(cel),
        )


_NO_KEY = re.compile(r'Key not found in map : "(.*)"')


def error_text(error: str) -> str:
    """An evaluation error as cel-go (kube-apiserver) words the common ones."""
    for prefix in ("NOT_FOUND: ", "INVALID_ARGUMENT: ", "OUT_OF_RANGE: "):  # absl status codes
        error = error.removeprefix(prefix)
    return _NO_KEY.sub(r"no such key: \1", error)
