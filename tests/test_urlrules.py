"""Learned URL rules (neardup.urlrules): synthetic variants, counter-examples, the learner."""

from __future__ import annotations

import random

from neardup.urlrules import RuleLearner, learn, normalize

H = "https://shop.example"


def names(rules):
    return sorted(r.name for r in rules)


def articles(n=6):
    """n distinct pages (cluster i) at /a/i, each under many URL variants."""
    obs = []
    for i in range(n):
        obs.append((f"{H}/a/{i}", i))
        obs.append((f"{H}/a/{i}?sid={1000 + i}", i))
        obs.append((f"{H}/a/{i}?utm_source=news&sid={2000 + i}", i))
        obs.append((f"{H}/print/a/{i}", i))
    return obs


def test_session_and_tracking_parameters_and_print_alias():
    rules = learn(articles())
    assert names(rules) == ["drop-param:sid", "drop-param:utm_source", "drop-segment:print"]
    for r in rules:
        assert r.support >= 3 and r.example is not None and r.host == "shop.example"
        assert "no counter-example" in r.describe()
        assert r.to_dict()["rule"] == r.name


def test_a_parameter_that_changes_the_content_never_becomes_a_rule():
    # id changes the content (each id its own cluster); sid does not
    obs = [(f"{H}/p?id={i}&sid={s}", i) for i in range(5) for s in range(3)]
    assert names(learn(obs)) == ["drop-param:sid"]
    # a parameter that mostly does not matter, but once does: one counter-example is enough
    obs = [(f"{H}/list?page={p}", 7) for p in range(1, 9)] + [(f"{H}/list?page=9", 8)]
    assert names(learn(obs)) == []
    # and mixed with a real rule, the real one survives
    obs += [(f"{H}/x?sid={s}", 9) for s in range(5)]
    assert names(learn(obs)) == ["drop-param:sid"]


def test_support_threshold():
    obs = [(f"{H}/p?sid={s}", 1) for s in range(3)]  # 2 merges
    assert learn(obs) == []
    assert names(learn(obs, min_support=2)) == ["drop-param:sid"]


def test_index_file_trailing_slash_sorted_parameters_and_digits():
    obs = []
    for i in range(5):
        obs += [(f"{H}/d{i}/", i), (f"{H}/d{i}/index.html", i), (f"{H}/d{i}", i)]
        obs += [(f"{H}/q?a={i}&b=x", 10 + i), (f"{H}/q?b=x&a={i}", 10 + i)]
    obs += [(f"{H}/calendar/2021-01-{d:02d}", 99) for d in range(1, 6)]
    got = names(learn(obs))
    assert got == ["any-digits:/calendar/N-N-N", "index-file:index.html", "sort-params", "trailing-slash"]


def test_rules_are_per_host():
    obs = articles() + [("https://other.example/a?sid=1", 50), ("https://other.example/a?sid=2", 51)]
    rules = learn(obs)
    assert {r.host for r in rules} == {"shop.example"}


def test_normalize_without_rules_only_lowercases_and_drops_fragment_and_port():
    assert normalize("HTTPS://Shop.Example:443/A?x=1#f") == ("https://shop.example/A?x=1", ())


def test_learner_match_and_contradiction():
    learner = RuleLearner()
    for url, cluster in articles():
        learner.observe(url, cluster)
    m = learner.match(f"{H}/print/a/3?utm_source=mail&sid=77")
    assert m is not None and m.cluster_id == 3 and m.known_url.startswith(f"{H}/")
    assert set(m.rules) == {"drop-segment:print", "drop-param:utm_source", "drop-param:sid"}
    assert learner.match(f"{H}/a/3") is None            # itself: nothing to skip
    assert learner.match(f"{H}/a/42?sid=1") is None     # unknown page
    assert learner.match("https://unknown.example/a/3?sid=1") is None
    # a fetch contradicts sid: /a/5?sid=9 holds other content than /a/5
    learner.observe(f"{H}/a/5?sid=9", 500)
    assert "drop-param:sid" not in names(learner.rules("shop.example"))
    assert learner.match(f"{H}/a/3?sid=12345") is None
    # utm_source was only ever seen beside a sid: without the sid rule it has no support left
    assert names(learner.rules()) == ["drop-segment:print"]


def test_learner_follows_growth_and_forgetting():
    learner = RuleLearner()
    for s in range(3):
        learner.observe(f"{H}/p?sid={s}", 1)
    assert learner.rules() == []                         # 2 merges only
    learner.observe(f"{H}/p?sid=3", 1)
    assert names(learner.rules()) == ["drop-param:sid"]
    for s in range(4):
        learner.forget(f"{H}/p?sid={s}")
    assert learner.rules() == []


def test_random_sites_never_merge_distinct_contents():
    """Property: on random sites where some parameters matter and some do not, no learned
    rule ever maps a URL to a known page of another content."""
    rng = random.Random(7)
    for trial in range(30):
        host = f"https://s{trial}.example"
        matter = [f"m{j}" for j in range(rng.randint(1, 2))]
        noise = [f"n{j}" for j in range(rng.randint(0, 3))]
        obs = {}
        for _ in range(rng.randint(5, 60)):
            content = tuple(rng.randint(0, 3) for _ in matter)
            params = [(m, str(v)) for m, v in zip(matter, content)]
            params += [(n, str(rng.randint(0, 50))) for n in noise if rng.random() < 0.6]
            rng.shuffle(params)
            url = host + "/p?" + "&".join(f"{k}={v}" for k, v in params)
            obs[url] = hash(content) & 0xFFFF
        rules = learn(obs.items(), min_support=2)
        assert not any(r.value in matter for r in rules)
        learner = RuleLearner(min_support=2)
        for url, cluster in obs.items():
            learner.observe(url, cluster)
        for url, cluster in obs.items():
            m = learner.match(url)
            assert m is None or obs[m.known_url] == cluster


def test_parameters_that_come_and_go_together():
    obs = []
    for i in range(4):
        obs += [(f"{H}/n/{i}", i), (f"{H}/n/{i}?utm_source=news&utm_medium=email", i)]
    assert names(learn(obs)) == ["drop-params:utm_medium,utm_source"]
    learner = RuleLearner()
    for url, cluster in obs:
        learner.observe(url, cluster)
    m = learner.match(f"{H}/n/2?utm_medium=rss")
    assert m is not None and m.known_url == f"{H}/n/2" and m.rules == ("drop-params:utm_medium,utm_source",)
    # but not when one of them changes the content
    obs.append((f"{H}/n/1?utm_source=x", 77))
    assert names(learn(obs)) == []
