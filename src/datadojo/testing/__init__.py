"""Test doubles shared by DataDojo's tests and benchmarks, and usable in a user's own tests.

Why a package of its own: a fake written beside the code it tests shares that code's blind spots. The doubles
here script what a real model, judge or user produces (answers that differ only in sign, percent, scale or
entity; a judge that disagrees with the rule; an agent whose first probe is ``os.walk('.')``), so every parser,
filter, judge and scorer is tested against them. One module per concern; nothing in ``datadojo`` imports this
package (it sits above every layer, beside ``cli``).
"""
