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


def cached_reverse(view_name: str, args: list[str], current_app: str | None) -> str:
    """`reverse(view_name, args=args)` for plain string arguments, from a shape reversed once
    per view name, number of arguments, URL conf and script prefix: the URL split around its
    placeholders, each argument put in its own."""
    key = (get_urlconf(), get_script_prefix(), current_app, view_name, len(args))
    shape = _shapes.get(key)
    if shape is None:
        placeholders = [f"zqx{i}xqz" for i in range(len(args))]
        url = reverse(view_name, args=placeholders, current_app=current_app)
        shape = _shapes[key] = PLACEHOLDER.split(url)
    # split() gives literal text at even places, a placeholder's index at odd ones
    return "".join(part if i % 2 == 0 else args[int(part)] for i, part in enumerate(shape))


class CachedURLNode(defaulttags.URLNode):
    def render(self, context):
        args = [arg.resolve(context) for arg in self.args]
        if self.kwargs or not all(isinstance(a, str) and PLAIN.fullmatch(a) for a in args):
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
