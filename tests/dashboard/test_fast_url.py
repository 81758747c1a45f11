"""The dashboard's `{% url %}` (templatetags/fast_url.py) writes what Django's writes: the
same URL for every dashboard view name, Django's own answer for arguments it cannot put in as
they are, and the same `as` and no-match behaviour. Its premise: dashboard URLs convert their
arguments with `str` or `slug` only."""

from __future__ import annotations

import re

import pytest
from django.template import Context, Template
from django.urls import NoReverseMatch, get_resolver, reverse
from django.urls.converters import SlugConverter, StringConverter

from memory_portal.dashboard import urls as dashboard_urls
from memory_portal.dashboard.templatetags.fast_url import PlainReverser


def _patterns(patterns, prefix=""):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if hasattr(pattern, "url_patterns"):
            yield from _patterns(pattern.url_patterns, route)
        else:
            yield route, pattern


def _names_and_arity():
    """Each dashboard URL name with the number of arguments its route takes."""
    for route, pattern in _patterns(dashboard_urls.urlpatterns):
        yield pattern.name, len(re.findall(r"<[^>]+>", route))


def test_dashboard_urls_convert_with_str_or_slug_only():
    resolver = get_resolver()
    dashboard = resolver.namespace_dict["dashboard"][1]
    for _, pattern in _patterns(dashboard.url_patterns):
        converters = getattr(pattern.pattern, "converters", {})
        for converter in converters.values():
            assert isinstance(converter, StringConverter | SlugConverter), pattern


def render(source: str, **context) -> str:
    return Template(source).render(Context(context))


ARGS = [
    ["p-1", "mem_01HX", "run_2", "x"],
    ["alpha_beta", "0123456789", "zqx1xqz", "zqx0xqz"],  # a placeholder's look-alike
    ["a b", "x/y", "ü", "?&"],  # quoted by reverse(): Django's answer
    ["{0}", "a}", "b{", "c"],  # braces: not plain, and never a format field
]


def _cases(args):
    """Each dashboard view name with `args` cut to its arity, and what Django's `reverse()`
    makes of them (None: no match)."""
    for name, arity in _names_and_arity():
        view = f"dashboard:{name}"
        values = args[:arity]
        try:
            expected = reverse(view, args=values)
        except NoReverseMatch:
            expected = None
        yield view, values, expected


@pytest.mark.parametrize("args", ARGS)
def test_every_dashboard_url_is_what_django_writes(args):
    for view, values, expected in _cases(args):
        context = {"view": view, **{f"a{i}": v for i, v in enumerate(values)}}
        tag_args = " ".join(f"a{i}" for i in range(len(values)))
        ours = "{% load fast_url %}{% url view " + tag_args + " as u %}[{{ u }}]"
        django = "{% url view " + tag_args + " as u %}[{{ u }}]"
        assert render(ours, **context) == render(django, **context)
        if expected is not None:
            shown = "{% load fast_url %}{% url view " + tag_args + " %}"
            assert render(shown, **context) == render("{% url view " + tag_args + " %}", **context)


def test_no_match_is_an_error_without_as_and_nothing_with_it():
    with pytest.raises(NoReverseMatch):
        render("{% load fast_url %}{% url 'dashboard:note' 'p' %}")
    assert render("{% load fast_url %}{% url 'dashboard:note' 'p' as u %}[{{ u }}]") == "[]"
    assert render("{% load fast_url %}{% url 'dashboard:project' slug='p' %}") == "/p/p/"


@pytest.mark.parametrize("args", ARGS)
def test_the_jinja_rows_url_is_what_django_writes(args):
    """`url()` of the Jinja2 rows (PlainReverser) is `reverse()`, errors included."""
    url = PlainReverser()
    for view, values, expected in _cases(args):
        if expected is None:
            with pytest.raises(NoReverseMatch):
                url(view, *values)
        else:
            assert url(view, *values) == expected
