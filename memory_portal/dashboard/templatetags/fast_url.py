"""`{% url %}` as Django's, with what a page reverses per row cached: a view name's URL is
reversed once with placeholders, then each row's ids are put in their places."""

from __future__ import annotations

import re

from django import template
from django.template import defaulttags
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse
from django.utils.html import conditional_escape

register = template.Library()

# What reverse() puts in a path as it is (no quoting) and the dashboard's converters (str and
# slug: tests/dashboard/test_urls.py holds them to that) accept: ids and slugs.
PLAIN = re.compile(r"[A-Za-z0-9_-]+")
PLACEHOLDER = re.compile(r"zqx(\d+)xqz")  # letters and digits: any str or slug converter takes it
_shapes: dict[tuple, list[str]] = {}


def _shape(key: tuple) -> str:
    """The URL of `key` (URL conf, script prefix, current app, view name, number of arguments)
    as a format string: reversed once with placeholders, which become `{0}`, `{1}`…"""
    shape = _shapes.get(key)
    if shape is None:
        urlconf, _prefix, current_app, view_name, count = key
        placeholders = [f"zqx{i}xqz" for i in range(count)]
        url = reverse(view_name, urlconf=urlconf, args=placeholders, current_app=current_app)
        # split() gives literal text at even places, a placeholder's index at odd ones
        shape = _shapes[key] = "".join(
            part.replace("{", "{{").replace("}", "}}") if i % 2 == 0 else "{" + part + "}"
            for i, part in enumerate(PLACEHOLDER.split(url))
        )
    return shape


def cached_reverse(view_name: str, args: list[str], current_app: str | None) -> str:
    """`reverse(view_name, args=args)` for plain string arguments, from a shape reversed once
    per view name, number of arguments, URL conf and script prefix, each argument put in its
    place."""
    return _shape((get_urlconf(), get_script_prefix(), current_app, view_name, len(args))).format(
        *args
    )


def _plain(args) -> bool:
    return all(isinstance(a, str) and PLAIN.fullmatch(a) for a in args)


class PlainReverser:
    """`url(view_name, *args)` of the dashboard's Jinja2 partials (dashboard/jinja.py): Django's
    `reverse`, through the cache above when every argument is a plain id or slug. It reads the
    URL conf and script prefix once, when made (once for a page's rows), not once a link.
    The dashboard's namespace has one instance, so no current app is needed to find it."""

    __slots__ = ("base",)

    def __init__(self) -> None:
        self.base = (get_urlconf(), get_script_prefix(), None)

    def __call__(self, view_name: str, *args) -> str:
        if _plain(args):
            return _shape((*self.base, view_name, len(args))).format(*args)
        return reverse(view_name, args=args)


class CachedURLNode(defaulttags.URLNode):
    def render(self, context):
        args = [arg.resolve(context) for arg in self.args]
        if self.kwargs or not _plain(args):
            return super().render(context)
        try:  # the current app as Django's URLNode finds it
            current_app = context.request.current_app
        except AttributeError:
            try:
                current_app = context.request.resolver_match.namespace
            except AttributeError:
                current_app = None
        try:
            url = cached_reverse(self.view_name.resolve(context), args, current_app)
        except NoReverseMatch:
            return super().render(context)  # Django's answer: an error, or "" with `as`
        if self.asvar:
            context[self.asvar] = url
            return ""
        return conditional_escape(url) if context.autoescape else url


@register.tag
def url(parser, token):
    """Django's `{% url %}` (same syntax and output), faster for the rows of a table."""
    node = defaulttags.url(parser, token)
    return CachedURLNode(node.view_name, node.args, node.kwargs, node.asvar)
