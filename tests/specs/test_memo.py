"""specs.memo.IdentityMemo: one value per (object identity, key), never served for another object; bounded."""

from simulator.specs.memo import IdentityMemo


class _Spec:
    def __init__(self, x):
        self.x = x


def test_one_make_per_object_and_key():
    memo, calls = IdentityMemo(), []

    def make(obj, k):
        calls.append((obj.x, k))
        return obj.x * 10 + k

    a, b = _Spec(1), _Spec(1)  # equal contents, different objects: separate entries
    assert memo.get(a, 2, lambda: make(a, 2)) == 12 and memo.get(a, 2, lambda: make(a, 2)) == 12
    assert memo.get(b, 2, lambda: make(b, 2)) == 12 and memo.get(a, 3, lambda: make(a, 3)) == 13
    assert calls == [(1, 2), (1, 2), (1, 3)]


def test_several_objects_must_all_be_the_same():
    memo, calls = IdentityMemo(), []
    a, h1, h2 = _Spec(1), _Spec("h100"), _Spec("b200")

    def make(h):
        calls.append(h.x)
        return h.x

    assert memo.get_for((a, h1), "k", lambda: make(h1)) == "h100"
    assert memo.get_for((a, h2), "k", lambda: make(h2)) == "b200"  # another second object: not the first's value
    assert memo.get_for((a, h1), "k", lambda: make(h1)) == "h100"
    assert calls == ["h100", "b200"]


def test_bounded():
    memo = IdentityMemo(size=4)
    objs = [_Spec(i) for i in range(10)]
    for o in objs:
        memo.get(o, 0, lambda o=o: o.x)
    assert len(memo._values) <= 4


def test_a_derived_profile_is_one_object_per_name():
    """load_hardware derives a what-if profile's kernels once: the same object on every call (identity memos of a
    sweep then hit across runs), its kernels the derived ones."""
    from simulator.specs.catalog import load_hardware
    a, b = load_hardware("b300"), load_hardware("b300")
    assert a is b and a.kernels.resolved
    assert not load_hardware("b300", resolve=False).kernels.resolved
