//! Tests of URL parsing, storage and rendering.
use super::*;

#[test]
fn parses_a_dubbo_provider_url() {
    let u =
        Url::parse("dubbo://10.20.3.3:20880/com.foo.BarService?region=hz&dubbo.tag=gray").unwrap();
    assert_eq!(u.protocol(), "dubbo");
    assert_eq!(u.host(), "10.20.3.3");
    assert_eq!(u.port(), 20880);
    assert_eq!(u.path(), "com.foo.BarService");
    assert_eq!(u.address(), "10.20.3.3:20880");
    assert_eq!(u.get("port"), Some("20880"));
    assert_eq!(u.get("region"), Some("hz"));
    assert_eq!(u.get("dubbo.tag"), Some("gray"));
    assert_eq!(u.get("missing"), None);
}

#[test]
fn port_zero_is_absent_and_address_is_host() {
    let u = Url::parse("consumer://10.0.0.1/svc?application=a").unwrap();
    assert_eq!(u.port(), 0);
    assert_eq!(u.get("port"), None);
    assert_eq!(u.address(), "10.0.0.1");
}

#[test]
fn ipv6_percent_decoding_and_last_key_wins() {
    let u = Url::parse("tri://[::1]:50051/a%2Fb?k=1&k=2&n%61me=v%20x&flag").unwrap();
    assert_eq!(u.host(), "::1");
    assert_eq!(u.address(), "[::1]:50051");
    assert_eq!(u.path(), "a/b");
    assert_eq!(u.param("k"), Some("2"));
    assert_eq!(u.param("name"), Some("v x"));
    assert_eq!(u.param("flag"), Some("flag"));
}

#[test]
fn user_info_is_split() {
    let u = Url::parse("zookeeper://admin:secret@127.0.0.1:2181").unwrap();
    assert_eq!(u.username(), Some("admin"));
    assert_eq!(u.password(), Some("secret"));
    assert_eq!(u.host(), "127.0.0.1");
}

#[test]
fn malformed_urls_are_located_errors() {
    for (input, column) in [
        ("dubbo://10.0.0.1:99999/x", 18),
        ("dubbo://10.0.0.1:/x", 18),
        ("dubbo://[::1/x", 9),
        ("dubbo://h/x?a=%ff", 15),
        ("dubbo://h/x?=v", 13),
        ("dub bo://h", 4),
        ("://h", 1),
        ("", 1),
        ("dubbo://::1:80/x", 9),
    ] {
        let e = Url::parse(input).expect_err(input);
        assert_eq!(e.column, column, "{input}: {e}");
        assert_eq!(e.input, input);
    }
}

#[test]
fn a_bare_percent_is_kept_and_parse_as_written_decodes_nothing() {
    let u = Url::parse("dubbo://h:1/x?discount=100%&a=%zz&b=50%25&c=a+b").unwrap();
    assert_eq!(u.param("discount"), Some("100%"));
    assert_eq!(u.param("a"), Some("%zz"));
    assert_eq!(u.param("b"), Some("50%"));
    assert_eq!(u.param("c"), Some("a+b"));
    let w = Url::parse_as_written("dubbo://h:1/x%2Fy?b=50%25&m=a%2Cb").unwrap();
    assert_eq!(w.path(), "x%2Fy");
    assert_eq!(w.param("b"), Some("50%25"));
    assert_eq!(w.param("m"), Some("a%2Cb"));
}

#[test]
fn from_parts_renders_and_reparses() {
    let u = Url::from_parts("dubbo", "10.0.0.9", 20880, "svc", [("b", "2"), ("a", "1")]);
    assert_eq!(u.raw(), "dubbo://10.0.0.9:20880/svc?a=1&b=2");
    assert_eq!(Url::parse(&u.raw()).unwrap().param("b"), Some("2"));
}

#[test]
fn last_of_many_duplicates_wins_in_any_order() {
    let u = Url::parse("dubbo://h:1/x?b=1&a=1&b=2&a=%32&c&b=3").unwrap();
    let params: Vec<_> = u.params().collect();
    assert_eq!(params, vec![("a", "2"), ("b", "3"), ("c", "c")]);
    // Already sorted input takes the no-sort path; equal neighbours still collapse.
    let u = Url::parse("dubbo://h:1/x?a=1&a=2&b=1").unwrap();
    assert_eq!(u.params().collect::<Vec<_>>(), vec![("a", "2"), ("b", "1")]);
    assert_eq!(u.to_string(), "dubbo://h:1/x?a=1&a=2&b=1");
    assert_eq!(u.get("port"), Some("1"));
    assert_eq!(u.address(), "h:1");
}

/// The query as Dubbo reads it, written the obvious way: split on `&`, the first `=`
/// splits key from value (a bare key is its own value), decode, last key wins.
fn reference_params(query: &str) -> Option<Vec<(String, String)>> {
    let mut map = std::collections::BTreeMap::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').unwrap_or((part, part));
        if k.is_empty() {
            return None;
        }
        let decode = |t: &str| {
            percent_encoding::percent_decode_str(t)
                .decode_utf8()
                .ok()
                .map(|d| d.into_owned())
        };
        map.insert(decode(k)?, decode(v)?);
    }
    Some(map.into_iter().collect())
}

proptest::proptest! {
    #[test]
    fn query_parameters_match_the_reference(query in "[a-c=&%2-4]{0,24}") {
        let url = Url::parse(&format!("dubbo://10.0.0.1:20880/svc?{query}"));
        match (url, reference_params(&query)) {
            (Ok(url), Some(expected)) => {
                let got: Vec<(String, String)> =
                    url.params().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                proptest::prop_assert_eq!(got, expected);
            }
            (Err(_), None) => {}
            (url, expected) => proptest::prop_assert!(false, "{url:?} vs {expected:?}"),
        }
    }

    #[test]
    fn parse_never_panics(s in "\\PC*") {
        let _ = Url::parse(&s);
    }

    #[test]
    fn parse_never_panics_on_url_like(s in "[a-z]{0,5}(://)?\\[?[0-9a-f:.%]{0,12}\\]?(:[0-9]{0,6})?(/[a-z%0-9]{0,5})?(\\?[a-z=&%0-9]{0,12})?") {
        let _ = Url::parse(&s);
    }
}

/// A provider URL as a registry writes it (keys sorted, nothing to decode).
const PROVIDER: &str = "dubbo://10.1.2.3:20880/com.example.search.IndexService?anyhost=true\
&application=index-provider&dubbo=2.0.2&env=prod&group=g1&idc=mt&interface=com.example.search.IndexService\
&methods=get,search,update,delete&region=beijing&release=3.3.0&side=provider&timeout=3000\
&timestamp=1700000000123&version=1.0.0&weight=100";

#[test]
fn a_registry_url_is_stored_compactly_without_its_raw_text() {
    let u = Url::parse(PROVIDER).unwrap();
    assert_eq!(u.flags() & store::HAS_RAW, 0, "canonical text is not kept");
    assert_eq!(u.raw(), PROVIDER);
    assert_eq!(u.to_string(), PROVIDER);
    assert_eq!(u.param("timestamp"), Some("1700000000123"));
    assert_eq!(u.param("methods"), Some("get,search,update,delete"));
    assert_eq!(u.params().len(), 15);
    // The block's count and length, header, 15 key/value references, the address and the
    // timestamp at most (padded to 8).
    assert!(
        u.heap_bytes() <= (16 + 19 + 15 * 6 + 18 + 14usize).next_multiple_of(8),
        "{}",
        u.heap_bytes()
    );
}

#[test]
fn text_that_does_not_render_back_is_kept_as_written() {
    for text in [
        "dubbo://h:1/x?b=1&a=2",
        "dubbo://h:1/x?a=1&a=2",
        "dubbo://h:1/x?flag",
        "dubbo://h:1/x?",
        "dubbo://h:1/",
        "dubbo://h:01/x",
        "dubbo://h:1/a%2Fb?k=v%20w",
        "10.0.0.1:20880",
        "zookeeper://admin:secret@127.0.0.1:2181",
    ] {
        let u = Url::parse(text).unwrap();
        assert_eq!(u.raw(), text);
        assert_eq!(u.to_string(), text);
        assert_eq!(Url::parse(text).unwrap(), u);
    }
    let u = Url::parse("zookeeper://admin:secret@127.0.0.1:2181").unwrap();
    assert_eq!(
        u.flags() & store::HAS_RAW,
        0,
        "plain user info renders back"
    );
}

#[test]
fn hosts_in_brackets_and_decoded_brackets() {
    let u = Url::parse("tri://[fe80::1%25a]/svc").unwrap();
    assert_eq!(
        (u.host(), u.port(), u.address()),
        ("fe80::1%25a", 0, "[fe80::1%25a]")
    );
    // A decoded `[x]` host is not an IPv6 host: its brackets are part of it.
    let u = Url::parse("dubbo://%5Bx%5D:7/svc").unwrap();
    assert_eq!(
        (u.host(), u.get("port"), u.address()),
        ("[x]", Some("7"), "[x]:7")
    );
    let u = Url::parse("dubbo://a%3Ab:7/svc").unwrap();
    assert_eq!((u.host(), u.address()), ("a:b", "[a:b]:7"));
}

#[test]
fn values_unique_to_a_provider_are_stored_inline_and_read_alike() {
    // Past the per-key limit, new values of `pid` are stored in the URL itself.
    let urls: Vec<Url> = (0..2 * crate::intern::VALUES_PER_KEY)
        .map(|i| Url::parse(&format!("dubbo://10.0.0.1:1/s?pid={i}&side=provider")).unwrap())
        .collect();
    for (i, u) in urls.iter().enumerate() {
        assert_eq!(u.param("pid"), Some(i.to_string().as_str()));
        assert_eq!(u.param("side"), Some("provider"));
    }
    let last = urls.last().unwrap();
    let first = &urls[0];
    assert!(
        last.heap_bytes() > first.heap_bytes(),
        "the last pid is inline"
    );
}

/// A key whose interned id is past 16 bits (keys are interned until one is).
fn key_past_16_bits() -> String {
    let lookup = crate::intern::Lookup::new();
    let mut i = 0;
    loop {
        let key = format!("wide-key-{i}");
        if lookup.key(&key).unwrap() >= u32::from(u16::MAX) {
            return key;
        }
        i += 1;
    }
}

#[test]
fn keys_past_16_bit_ids_are_stored_wide() {
    let wide_key = key_past_16_bits();
    // `address` and `protocol` are among the first ids of the process.
    let text = format!("dubbo://h:1/s?address=1&protocol=2&{wide_key}=v");
    let u = Url::parse(&text).unwrap();
    assert_ne!(u.flags() & store::WIDE_KEYS, 0);
    assert_eq!(u.param(&wide_key), Some("v"));
    assert_eq!(
        (u.param("address"), u.param("protocol")),
        (Some("1"), Some("2"))
    );
    assert_eq!(u.raw(), text);
    let narrow = Url::parse("dubbo://h:1/s?address=1&protocol=2").unwrap();
    assert_eq!(narrow.flags() & store::WIDE_KEYS, 0);
    assert_eq!(
        (narrow.param("address"), narrow.param("protocol")),
        (Some("1"), Some("2"))
    );
    assert_eq!(narrow.get("address"), Some("h:1"));
}

#[test]
fn from_parts_and_empty_render_their_parts() {
    assert_eq!(Url::empty().raw(), "");
    assert_eq!(Url::empty().to_string(), "");
    let u = Url::from_parts("tri", "::1", 50051, "/svc", [("k", "a&b")]);
    assert_eq!(u.raw(), "tri://[::1]:50051/svc?k=a&b");
    assert_eq!(u.param("k"), Some("a&b"));
    assert_eq!(u.host(), "::1");
}

proptest::proptest! {
    #[test]
    fn the_text_and_the_parts_survive_storage(
        s in "[a-z]{1,5}://(u(:p)?@)?[a-z0-9.]{1,8}(:[0-9]{1,5})?(/[a-z%0-9]{0,5})?(\\?[a-c=&%2-4]{0,16})?"
    ) {
        if let Ok(u) = Url::parse(&s) {
            proptest::prop_assert_eq!(u.raw(), s.as_str());
            proptest::prop_assert_eq!(u.to_string(), s.clone());
            let again = Url::parse(&u.raw()).unwrap();
            proptest::prop_assert_eq!(&again, &u);
            for (k, v) in u.params() {
                proptest::prop_assert_eq!(u.param(k), Some(v));
            }
        }
    }

    /// Near-canonical shapes: bracketed hosts, signed or zero-padded ports, sorted and
    /// unsorted keys, escapes; the raw text is kept exactly when rendering would differ
    /// (checked by a debug assertion in `parse`), and the text always reads back.
    #[test]
    fn the_raw_text_is_kept_exactly_when_needed(
        s in "[a-z]{0,3}(://)?(\\[[0-9a-f:]{1,6}\\]|[a-z0-9.%]{0,8})(:[+0-9]{1,6})?(/[a-z%2]{0,4})?(\\?([a-d](=[a-z0-9%]{0,3})?&){0,4}[a-d]=[0-9]{1,3})?"
    ) {
        if let Ok(u) = Url::parse(&s) {
            proptest::prop_assert_eq!(u.raw(), s.as_str());
            proptest::prop_assert_eq!(u.flags() & store::HAS_RAW == 0, u.renders_as(&s));
        }
    }
}

#[test]
fn the_previous_urls_parameters_are_reused_only_when_equal() {
    let texts = [
        "dubbo://h:1/s?a=1&b=2&pid=7",
        "dubbo://h:1/s?a=1&b=3&c=4&pid=8",
        "dubbo://h:1/s?b=2&a=1",
        "dubbo://h:1/s?a=1&b=2&pid=7",
        "dubbo://h:1/s?a=%31&bb=2",
    ];
    for text in texts {
        let u = Url::parse(text).unwrap();
        let want: Vec<(String, String)> = text
            .split_once('?')
            .unwrap()
            .1
            .split('&')
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                (k.to_string(), v.replace("%31", "1"))
            })
            .collect();
        for (k, v) in &want {
            assert_eq!(u.param(k), Some(v.as_str()), "{text}: {k}");
        }
        assert_eq!(u.params().len(), want.len());
        assert_eq!(u.raw(), text);
    }
}

#[test]
fn equality_compares_parts_and_text_without_allocating() {
    let a = Url::parse(PROVIDER).unwrap();
    let b = Url::parse(PROVIDER).unwrap();
    let kept = Url::parse("dubbo://h:1/x?b=1&a=2").unwrap();
    let sorted = Url::parse("dubbo://h:1/x?a=2&b=1").unwrap();
    let info = allocation_counter::measure(|| {
        assert_eq!(a, b);
        assert_ne!(a, kept);
        // Same parts, different text.
        assert_ne!(kept, sorted);
        assert_eq!(kept, Url::parse("dubbo://h:1/x?b=1&a=2").unwrap());
    });
    // Only the two parses allocate (a block and the parser's scratch each).
    assert!(info.count_total <= 6, "{info:?}");
    let consumer = Url::parse("consumer://10.0.0.1/s?app=a").unwrap();
    let other = Url::parse("consumer://10.0.0.2/s?app=a").unwrap();
    let info = allocation_counter::measure(|| {
        assert_ne!(consumer, other);
        assert_eq!(consumer, consumer.clone());
    });
    assert_eq!(
        info.count_total, 0,
        "a clone is a count increment: {info:?}"
    );
}

#[test]
fn a_url_is_one_block_and_heap_bytes_is_what_the_allocator_gave() {
    // Lengths around the padding to 8, inline strings, a kept raw text, and one past the
    // builder's stack buffer.
    let long = "v".repeat(600);
    let mut texts: Vec<String> = (0..9)
        .map(|i| format!("dubbo://10.0.0.1:1/s?pid=p{}", "x".repeat(i)))
        .collect();
    texts.push(PROVIDER.to_string());
    texts.push("dubbo://h:1/x?b=1&a=2".to_string());
    texts.push(format!("dubbo://h:1/x?b={long}&a=2"));
    // Intern the keys and values first: only the block is measured.
    for t in &texts {
        let _ = Url::parse(t).unwrap();
    }
    for t in &texts {
        let mut url = None;
        let info = allocation_counter::measure(|| url = Some(Url::parse(t).unwrap()));
        let url = url.unwrap();
        assert_eq!(info.count_current, 1, "{t}: one block, {info:?}");
        assert_eq!(
            info.bytes_current as usize,
            url.heap_bytes(),
            "{t}: {info:?}"
        );
        let heap = url.heap_bytes() as i64;
        let info = allocation_counter::measure(|| drop(url));
        assert_eq!(info.bytes_current, -heap, "{t}: freed whole");
    }
}

#[test]
fn clones_share_their_block_and_equal_texts_are_distinct_blocks() {
    let a = Url::parse(PROVIDER).unwrap();
    let b = a.clone();
    let c = Url::parse(PROVIDER).unwrap();
    assert!(Url::ptr_eq(&a, &b) && a.block_addr() == b.block_addr());
    assert_eq!(Url::strong_count(&a), 2);
    assert!(!Url::ptr_eq(&a, &c) && a.block_addr() != c.block_addr());
    assert_eq!(a, c, "equal, not shared");
    drop(b);
    assert_eq!(Url::strong_count(&a), 1);
    assert_eq!(std::mem::size_of::<Url>(), std::mem::size_of::<usize>());
    assert_eq!(
        std::mem::size_of::<Option<Url>>(),
        std::mem::size_of::<usize>()
    );
}

/// The largest offset of an inline string named by the header's references of `u` (3 bytes
/// wide): what decides the width with the strings after the user name.
fn last_header_offset(u: &Url, refs: usize) -> usize {
    assert_eq!(u.flags() & store::WIDE_REFS, 0);
    (0..refs)
        .filter_map(|i| match store::ref_at(u.bytes(), store::REFS + 3 * i, 3) {
            (true, offset) => Some(offset as usize),
            (false, _) => None,
        })
        .max()
        .unwrap()
}

#[test]
fn inline_offsets_at_and_past_23_bits_make_the_references_wide() {
    let limit = store::NARROW_LIMIT as usize;
    // A user name of `len` bytes (user info stays in the URL, first of its inline strings)
    // moves the strings after it by `len` − 1, plus 3 for its length's LEB128 bytes (4 from
    // 2^21 on): the last one reaches 2^23 at `limit − base − 2`. Whether the address and the
    // path are interned depends on the process (their keys' values may be saturated): the
    // short URL is parsed first, settling it.
    let shape = |user: &str| format!("dubbo://{user}:pw@h:1/s");
    let _ = Url::parse(&shape("u")).unwrap();
    let base = last_header_offset(&Url::parse(&shape("u")).unwrap(), 5);
    let at = limit - base - 2;
    for (len, wide) in [(at - 1, false), (at, true), (at + 1000, true)] {
        let text = shape(&"u".repeat(len));
        let u = Url::parse(&text).unwrap();
        assert_eq!(u.flags() & store::WIDE_REFS != 0, wide, "{len}");
        if !wide {
            assert_eq!(last_header_offset(&u, 5), limit - 1);
        }
        assert_eq!(u.flags() & store::HAS_RAW, 0);
        assert_eq!(u.username().map(str::len), Some(len));
        assert_eq!(
            (u.password(), u.address(), u.path(), u.port()),
            (Some("pw"), "h:1", "s", 1)
        );
        assert_eq!(u.raw(), text);
        assert_eq!(u, Url::parse(&text).unwrap());
    }
    // A kept raw text (the parameters unsorted) is the block's last string: at 2^23, the
    // references are wide.
    let shape = |user: &str| format!("dubbo://{user}@h:1/s?b=1&a=2");
    let _ = Url::parse(&shape("u")).unwrap();
    let u = Url::parse(&shape("u")).unwrap();
    let raw_len = shape("u").len();
    let base = u.bytes().len() - 1 - raw_len;
    assert_eq!(last_header_offset(&u, 5), base);
    let at = limit - base - 2;
    for (len, wide) in [(at - 1, false), (at, true)] {
        let text = shape(&"u".repeat(len));
        let u = Url::parse(&text).unwrap();
        assert_ne!(u.flags() & store::HAS_RAW, 0);
        assert_eq!(u.flags() & store::WIDE_REFS != 0, wide, "{len}");
        assert_eq!(u.raw(), text);
        assert_eq!(u.to_string(), text);
        assert_eq!(u.username().map(str::len), Some(len));
        assert_eq!((u.param("a"), u.param("b")), (Some("2"), Some("1")));
    }
}

/// `n` parameters `k000=v0&k001=v1...` (keys sorted), with `extra` appended.
fn many_params(n: usize, extra: &str) -> String {
    let query: Vec<String> = (0..n).map(|i| format!("k{i:03}=v{i}")).collect();
    format!("dubbo://10.0.0.1:20880/s?{}{extra}", query.join("&"))
}

#[test]
fn more_than_254_parameters_are_counted_in_four_bytes() {
    for n in [0, 1, 253, 254, 255, 256, 300, 999] {
        for extra in ["", "&a=last"] {
            let text = many_params(n, extra);
            let u = Url::parse(&text).unwrap();
            let count = n + usize::from(!extra.is_empty());
            assert_eq!(u.params().len(), count, "{n}{extra}");
            assert_eq!(
                u.flags() & store::MANY_PARAMS != 0,
                count > 254,
                "{n}{extra}"
            );
            for i in 0..n {
                let key = format!("k{i:03}");
                let want = format!("v{i}");
                assert_eq!(u.param(&key), Some(want.as_str()));
                assert_eq!(u.get_key(&UrlKey::new(&key)), Some(want.as_str()));
            }
            assert_eq!(u.param("a"), (!extra.is_empty()).then_some("last"));
            assert_eq!(u.param("k"), None);
            assert_eq!(u.raw(), text);
            assert_eq!(u, Url::parse(&text).unwrap());
            // A duplicate key (last wins) in a long list.
            let dup = format!("{text}&k000=again");
            let d = Url::parse(&dup).unwrap();
            assert_eq!(d.params().len(), count + usize::from(n == 0));
            assert_eq!(d.param("k000"), Some("again"));
            assert_eq!(d.raw(), dup);
        }
    }
}

#[test]
fn wide_keys_with_narrow_and_wide_references() {
    let wide_key = key_past_16_bits();
    let limit = store::NARROW_LIMIT as usize;
    // (The password, inline after a user name of 2^23 bytes, is past 23 bits.)
    for user in [String::new(), "u".repeat(limit)] {
        let at = if user.is_empty() { "" } else { ":pw@" };
        let text = format!("dubbo://{user}{at}h:1/s?address=1&protocol=2&{wide_key}=v&zz=last");
        let u = Url::parse(&text).unwrap();
        assert_ne!(u.flags() & store::WIDE_KEYS, 0);
        assert_eq!(u.flags() & store::WIDE_REFS != 0, !user.is_empty());
        assert_eq!(u.param(&wide_key), Some("v"));
        assert_eq!(u.get_key(&UrlKey::new(&wide_key)), Some("v"));
        assert_eq!(
            (u.param("address"), u.param("protocol"), u.param("zz")),
            (Some("1"), Some("2"), Some("last"))
        );
        assert_eq!(u.get_key(&UrlKey::new("address")), Some("h:1"));
        assert_eq!(u.params().len(), 4);
        assert_eq!(
            u.username().map(str::len),
            (!user.is_empty()).then_some(user.len())
        );
        assert_eq!(u.raw(), text);
    }
}

proptest::proptest! {
    /// Around 255 parameters (the count's byte), some keys repeated, escapes: the
    /// parameters read as the reference model says.
    #[test]
    fn long_parameter_lists_match_the_reference(
        params in proptest::collection::vec(("[a-z]{1,3}", "[0-9a-z%]{0,4}"), 250..262),
    ) {
        let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let query = query.join("&");
        let text = format!("dubbo://h:1/s?{query}");
        let expected = reference_params(&query);
        match (Url::parse(&text), expected) {
            (Ok(u), Some(expected)) => {
                let got: Vec<(String, String)> =
                    u.params().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                proptest::prop_assert_eq!(&got, &expected);
                for (k, v) in &expected {
                    proptest::prop_assert_eq!(u.param(k), Some(v.as_str()));
                }
                proptest::prop_assert_eq!(u.raw(), text.as_str());
            }
            (Err(_), None) => {}
            (url, expected) => proptest::prop_assert!(false, "{url:?} vs {expected:?}"),
        }
    }
}

/// The derived keys come from one table: their names, the parts [`Url::get`] and a
/// [`UrlKey`] read, and the interned id their stored values are interned under.
#[test]
fn derived_keys_are_read_from_the_one_table() {
    assert_eq!(
        DERIVED_KEYS,
        ["protocol", "host", "port", "path", "address"]
    );
    let u =
        Url::parse("dubbo://[::1]:20880/svc?protocol=p&host=h&port=1&path=x&address=a").unwrap();
    let none = Url::parse("dubbo://10.0.0.1/svc").unwrap();
    let want = [
        Some("dubbo"),
        Some("::1"),
        Some("20880"),
        Some("svc"),
        Some("[::1]:20880"),
    ];
    for ((d, name), want) in Derived::ALL.into_iter().zip(DERIVED_KEYS).zip(want) {
        assert_eq!(Derived::of(name), Some(d));
        assert_eq!(u.get(name), want, "{name}");
        assert_eq!(u.get_key(&UrlKey::new(name)), want, "{name}");
        // A parameter of the same name is not what the key reads.
        assert_ne!(u.get(name), u.param(name), "{name}");
        assert_eq!(
            none.get_key(&UrlKey::new(name)),
            none.get(name),
            "{name} without a port"
        );
        let id = d.id();
        assert_eq!(crate::intern::resolve(id), name);
    }
    assert_eq!(none.get("port"), None);
    assert_eq!(Derived::of("zone"), None);
}
