//! Property tests of [`ChunkPlan`]: the spans of a plan tile `[0, size)` exactly.
//!
//! Regressions (seeds of failures proptest found) are kept in
//! `proptest-regressions/props_chunk_plan.txt`, which is worth committing.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use soku_proto::chunk::{ChunkPlan, DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE};

/// Largest file size the properties try (1 PiB).
const MAX_SIZE: u64 = 1 << 50;
/// Plans with at most this many chunks are walked span by span.
const WALK_LIMIT: u64 = 4096;

fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proptest-regressions/props_chunk_plan.txt"
        )))),
        ..ProptestConfig::default()
    }
}

fn chunk_size() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(MIN_CHUNK_SIZE),
        Just(MAX_CHUNK_SIZE),
        Just(DEFAULT_CHUNK_SIZE),
        MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE,
    ]
}

/// A chunk size and a file size: anywhere in range, small enough to walk every span, on
/// or next to a multiple of the chunk size (where off-by-one errors live), or the extremes.
fn plan() -> impl Strategy<Value = (u64, u32)> {
    chunk_size().prop_flat_map(|cs| {
        let c = u64::from(cs);
        let size = prop_oneof![
            0..=MAX_SIZE,
            0..=WALK_LIMIT * c,
            (0..=MAX_SIZE / c, -1i64..=1)
                .prop_map(move |(k, d)| { (k * c).saturating_add_signed(d).min(MAX_SIZE) }),
            Just(0),
            Just(1),
            Just(MAX_SIZE),
        ];
        (size, Just(cs))
    })
}

/// Checks chunk `index` of a plan against the closed form: offset `index * c`, length `c`
/// except for the last chunk, which ends exactly at `size`.
fn check_span(plan: &ChunkPlan, size: u64, c: u64, count: u64, index: u32) {
    let i = u64::from(index);
    let span = plan.span(index);
    if i >= count {
        assert_eq!(span, None, "index {index} is past the last chunk ({count} chunks)");
        return;
    }
    let (offset, len) = span.unwrap_or_else(|| panic!("chunk {index} of {count} missing"));
    assert_eq!(u128::from(offset), u128::from(i) * u128::from(c), "offset of chunk {index}");
    assert!((1..=c).contains(&u64::from(len)), "chunk {index} has length {len} (c = {c})");
    let end = offset + u64::from(len);
    assert!(end <= size, "chunk {index} ends at {end}, past the file's end {size}");
    if i + 1 < count {
        assert_eq!(u64::from(len), c, "only the last chunk may be short");
        if let Ok(n) = u32::try_from(i + 1) {
            let next = plan.span(n).map(|(offset, _)| offset);
            assert_eq!(next, Some(end), "gap or overlap between chunks {index} and {n}");
        }
    } else {
        assert_eq!(end, size, "the last chunk must end at the file's end");
    }
}

proptest! {
    #![proptest_config(config())]

    /// Catches: a floor instead of a ceiling in `count()` (the tail is never sent), a last
    /// chunk of length 0 or `c` when `size` is (not) a multiple of `c`, gaps or overlaps
    /// between neighbours, a span past `count()`, and an offset computed in 32 bits (wraps
    /// past 4 GiB): every span of a small plan is walked and must add up to `size`.
    #[test]
    fn spans_tile_the_file_exactly((size, cs) in plan()) {
        let plan = ChunkPlan::new(size, cs);
        let c = u64::from(cs);
        let count = plan.count();
        // count = ceil(size / c), checked without division.
        prop_assert!(u128::from(count) * u128::from(c) >= u128::from(size));
        prop_assert!(count == 0 || u128::from(count - 1) * u128::from(c) < u128::from(size));
        if count <= WALK_LIMIT {
            let mut next = 0u64;
            for index in 0..count {
                let index = u32::try_from(index).expect("small plan");
                let (offset, len) = plan.span(index).expect("every index below count()");
                prop_assert_eq!(offset, next, "chunk {} starts off the one before's end", index);
                prop_assert!((1..=cs).contains(&len), "chunk {} has length {}", index, len);
                next = offset + u64::from(len);
            }
            prop_assert_eq!(next, size, "the spans do not add up to the file");
            prop_assert_eq!(plan.span(u32::try_from(count).expect("small")), None);
        }
    }

    /// Catches: overflow or a panic for indices near `u32::MAX` and files far larger than
    /// 4 GiB, and spans of huge plans that stray from the closed form (checked at the
    /// ends, at random indices, and at each of their neighbours).
    #[test]
    fn spans_of_huge_plans_follow_the_closed_form(
        (size, cs) in plan(),
        picks in prop::collection::vec(any::<u64>(), 1..16),
        raw in any::<u32>(),
    ) {
        let plan = ChunkPlan::new(size, cs);
        let c = u64::from(cs);
        let count = plan.count();
        let mut indices = vec![0, 1, u32::MAX - 1, u32::MAX, raw];
        if count > 0 {
            for i in [count - 1, count.saturating_sub(2), count] {
                indices.extend(u32::try_from(i).ok());
            }
            for pick in picks {
                indices.extend(u32::try_from(pick % count).ok());
            }
        }
        for index in indices {
            check_span(&plan, size, c, count, index);
            check_span(&plan, size, c, count, index.saturating_add(1));
        }
        // A plan the receiver accepts (at most u32::MAX chunks, see
        // crates/soku-proto/src/receive.rs) has exactly count() spans; a larger one has a
        // full chunk at every u32 index.
        match u32::try_from(count) {
            Ok(n) => prop_assert_eq!(plan.span(n), None),
            Err(_) => prop_assert_eq!(plan.span(u32::MAX), Some((u64::from(u32::MAX) * c, cs))),
        }
    }
}
