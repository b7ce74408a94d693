"""The judges of picogpt/verse.py (rhyme by 十三辙, tones by 平仄) on characters whose readings are
written here by hand, and the shares the poems task measures with them."""

import pytest

from picogpt import verse


@pytest.mark.parametrize("rhyming, other", [
    ("山间天年", "人"),  # shān jiān tiān nián: an, ian (言前)
    ("流楼愁舟", "山"),  # liú lóu chóu zhōu: iu, ou (油求)
    ("人春门云", "风"),  # rén chūn mén yún: en, un, ün (人辰)
    ("月雪节", "花"),  # yuè xuě jié: üe, ie (乜斜)
    ("知诗衣去", "乡"),  # zhī shī yī qù: i, ü (一七)
])
def test_characters_of_one_group_rhyme_and_another_does_not(rhyming, other):
    heard = [verse.rhyme(char) for char in rhyming]
    assert len(set(heard)) == 1 and None not in heard, heard
    assert verse.rhymes(rhyming[0], other) is False
    assert verse.rhymes(rhyming[0], "，") is None  # a mark has no rhyme: not judged


def test_tones_and_their_opposition():
    assert [verse.tone(c) for c in "天年好月"] == ["平", "平", "仄", "仄"]
    # 白日依山尽 / 黄河入海流: even places 日/河 (仄/平), 山/海 (平/仄): both oppose
    assert verse.opposition("白日依山尽", "黄河入海流") == (2, 2)
    assert verse.opposition("白日依山尽", "白日依山尽") == (0, 2)


def test_a_neutral_reading_is_judged_by_the_first_toned_one():
    """子 zi, 着 zhe, 了 le are in the neutral tone as pypinyin reads them first; verse gives
    them a full tone: 子 zǐ, 着 zhāo (its first toned reading, before zháo and zhuó), 了 liǎo.
    游子 (yóu zǐ) and 君子 are judged; a mark still is not."""
    assert [verse.tone(c) for c in "子着了"] == ["仄", "平", "仄"]
    assert verse.opposition("游子", "君王") == (1, 1)  # 子 仄 against 王 平
    assert verse.tone("，") is None


def test_the_rhyme_share_counts_only_what_it_can_judge():
    assert verse.rhyme_share([("山", "间"), ("山", "人"), ("山", "，")]) == (0.5, 2)
    assert verse.rhyme_share([]) == (0, 0)


def test_a_shuffled_item_comes_from_another_poem_of_the_same_length():
    items, lengths = ["a5", "b7", "c5", "d7", "e5", "f6"], [5, 7, 5, 7, 5, 6]
    moved = verse.shuffled(items, lengths)
    assert moved == ["c5", "d7", "e5", "b7", "a5", "f6"]  # f6 has no other of its length
    assert all(m[1] == i[1] for m, i in zip(moved, items))
    assert sorted(moved) == sorted(items)
