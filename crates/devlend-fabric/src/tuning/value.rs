//! One override's value: its unit and its physical bounds, by the constant it sets.

use serde_json::Value;
use std::fmt;

/// What a constant measures, and so which values and units it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Max_Payload_Size or Max_Read_Request_Size: 128 to 4096 bytes, a power of two (PCIe Base
    /// 4.0 §7.5.3.4, Device Control register encodings 000b-101b).
    SizeField,
    /// A completion's size: a multiple of the Read Completion Boundary (64 or 128 bytes, PCIe
    /// Base 3.0 §2.3.1.1), a power of two up to the largest Max_Payload_Size.
    Completion,
    /// A root complex's re-split request size: a power of two from one cache line to 4096 bytes
    /// (assumed bounds: no request is larger than the largest MRRS).
    Split,
    /// Outstanding non-posted requests: 1 to 768 (10-bit tags, PCIe Base 4.0 §2.2.6.2).
    Tags,
    /// Receive buffers in TLPs: at least one (with none, nothing is ever sent).
    Buffers,
    /// Entries of a cache: 0 (none) to 65536 (assumed bound: far above any published IOTLB).
    Entries,
    /// A share of a specification limit, 1 to 100 percent (a timer may run shorter, not longer).
    Percent,
    Picoseconds,
    Metres,
    Flag,
    /// A link's PCIe generation: 1 to 5 (2.5 to 32 GT/s, PCIe Base 5.0 §4.2).
    Gen,
    /// A link's width in lanes: x1, x2, x4, x8, x12 or x16 (PCIe Base 3.0 §4.2.4.1).
    Width,
    /// A capacity or budget in bytes: at least one 512-byte block.
    Bytes,
    /// Commands a device works on at once (a drive's media): 1 to 1024 (assumed bound: a drive's queue
    /// entries, nvme.rs MAX_QUEUE_ENTRIES).
    Count,
    /// A rate in bytes per second: at least 1.
    Rate,
}

impl Kind {
    /// The unit a value of this kind is in when given as a bare number, for `devlend params`.
    pub fn unit(self) -> &'static str {
        match self {
            Kind::SizeField | Kind::Completion | Kind::Split | Kind::Bytes => "bytes",
            Kind::Picoseconds => "ps",
            Kind::Metres => "m",
            Kind::Tags => "outstanding requests",
            Kind::Buffers => "TLPs",
            Kind::Entries => "entries",
            Kind::Percent => "percent",
            Kind::Flag => "true/false",
            Kind::Gen => "PCIe generation",
            Kind::Width => "lanes",
            Kind::Count => "commands",
            Kind::Rate => "bytes/s",
        }
    }

    /// The kind of a device kind's own setting by the unit its `[device_kind.KIND]` table gives:
    /// `ps`, `bytes` (at least a block), `bytes/s` or `commands`.
    pub fn of_unit(unit: &str) -> Option<Kind> {
        [Kind::Picoseconds, Kind::Bytes, Kind::Rate, Kind::Count].into_iter().find(|k| k.unit() == unit)
    }

    /// The kind of a setting every device, host, link or the whole fabric has, by its key.
    pub fn of(key: &str) -> Kind {
        match key {
            "max_payload" | "max_read_request" => Kind::SizeField,
            "ram_completion_bytes" => Kind::Completion,
            "read_split_bytes" => Kind::Split,
            "read_tags" => Kind::Tags,
            "rx_buffer_tlps" => Kind::Buffers,
            "dllp_timer_pct" => Kind::Percent,
            "iotlb_entries" | "pwc_entries" => Kind::Entries,
            "cable_length_m" => Kind::Metres,
            "switch_cut_through" | "iotlb_lru" | "interrupt_remapping" => Kind::Flag,
            "gen" => Kind::Gen,
            "width" => Kind::Width,
            "memory_bytes" => Kind::Bytes,
            _ => Kind::Picoseconds,
        }
    }

    fn units(self) -> &'static [(&'static str, f64)] {
        match self {
            Kind::SizeField | Kind::Completion | Kind::Split => &[("B", 1.0), ("KiB", 1024.0)],
            Kind::Picoseconds => &[("ps", 1.0), ("ns", 1e3), ("us", 1e6), ("ms", 1e9), ("s", 1e12)],
            Kind::Metres => &[("m", 1.0)],
            Kind::Bytes => &[("B", 1.0), ("KiB", 1024.0), ("MiB", 1048576.0), ("GiB", 1073741824.0), ("TiB", 1099511627776.0), ("GB", 1e9), ("TB", 1e12)],
            Kind::Rate => &[("B/s", 1.0), ("MB/s", 1e6), ("GB/s", 1e9)],
            Kind::Tags | Kind::Buffers | Kind::Percent | Kind::Entries | Kind::Flag | Kind::Gen | Kind::Width | Kind::Count => &[],
        }
    }

    fn expected(self) -> String {
        let units: Vec<&str> = self.units().iter().map(|u| u.0).collect();
        match self {
            Kind::Flag => "true or false".into(),
            Kind::Tags | Kind::Buffers | Kind::Percent | Kind::Entries | Kind::Gen | Kind::Width | Kind::Count => "a whole number".into(),
            _ => format!("a whole number of {} or a string with a unit ({})", units[0], units.join(", ")),
        }
    }

    fn check(self, n: u64) -> Result<(), ValueError> {
        let pow2 = |lo: u64, hi: u64| n.is_power_of_two() && (lo..=hi).contains(&n);
        let ok = match self {
            Kind::SizeField => pow2(128, 4096),
            Kind::Completion => pow2(64, 4096),
            Kind::Split => pow2(64, 4096),
            Kind::Tags => (1..=768).contains(&n),
            Kind::Buffers => (1..=u32::MAX as u64).contains(&n),
            Kind::Percent => (1..=100).contains(&n),
            Kind::Entries => n <= 65536,
            Kind::Gen => (1..=5).contains(&n),
            Kind::Width => devlend_wire::VALID_WIDTHS.contains(&(n.min(255) as u8)),
            Kind::Bytes => n >= 512,
            Kind::Count => (1..=1024).contains(&n),
            Kind::Rate => n >= 1,
            Kind::Picoseconds | Kind::Metres | Kind::Flag => true,
        };
        if ok {
            return Ok(());
        }
        Err(ValueError::OutOfRange { kind: self, value: n })
    }

    /// Why `n` is out of this kind's bounds, and what they are.
    fn out_of_range(self, f: &mut fmt::Formatter<'_>, n: u64) -> fmt::Result {
        match self {
            Kind::SizeField => write!(f, "{n} is not a size the Device Control register can hold: 128, 256, 512, 1024, 2048 or 4096 bytes (PCIe Base 4.0 §7.5.3.4)"),
            Kind::Completion => write!(f, "{n} is not a completion size a root complex returns: a power of two from the 64-byte read completion boundary to 4096 bytes (PCIe Base 3.0 §2.3.1.1)"),
            Kind::Split => write!(f, "{n} is not a power of two from 64 to 4096 bytes"),
            Kind::Tags => write!(f, "{n} outstanding requests: a requester has 1 to 768 tags (10-bit tags, PCIe Base 4.0 §2.2.6.2)"),
            Kind::Entries => write!(f, "{n} entries: a cache here holds 0 to 65536"),
            Kind::Gen => write!(f, "Gen{n}: a PCIe generation is 1 to 5 (2.5, 5, 8, 16 or 32 GT/s)"),
            Kind::Width => write!(f, "x{n}: a link is x1, x2, x4, x8, x12 or x16 (PCIe Base 3.0 §4.2.4.1)"),
            Kind::Bytes => write!(f, "{n} bytes: at least one 512-byte block"),
            Kind::Count => write!(f, "{n} commands at once: 1 to 1024"),
            Kind::Rate => write!(f, "{n} bytes per second: at least 1"),
            Kind::Percent => write!(f, "{n}%: a share of the specification's limit is 1 to 100 percent (the AckNak and UpdateFC timers may fire sooner than their limit, never later: PCIe Base 3.0 §3.5.3.1, §2.6.1.2)"),
            _ => write!(f, "{n} receive buffers: at least one is needed to send anything"),
        }
    }
}

/// Why an override's value is refused: the constant's kind and what was given. The topology
/// loader reports it at the setting's path, with the constant's name (`ParamFault::Value`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueError {
    /// A JSON value of a type the kind does not take (a flag that is not a boolean, a number that
    /// is not a whole non-negative one, an array...).
    Type { kind: Kind, got: Value },
    /// A string whose number does not parse.
    NotANumber { kind: Kind, given: String },
    /// A unit the kind does not take.
    Unit { kind: Kind, unit: String },
    /// A number with a unit that is not a whole number of the kind's base unit.
    NotWhole { kind: Kind, given: String },
    /// A whole number outside the kind's bounds.
    OutOfRange { kind: Kind, value: u64 },
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::Type { kind, got } => write!(f, "expected {}, got {got}", kind.expected()),
            ValueError::NotANumber { kind, given } => write!(f, "'{given}' is not {}", kind.expected()),
            ValueError::Unit { kind, unit } => write!(f, "unit '{unit}' does not fit: {}", kind.expected()),
            ValueError::NotWhole { kind, given } => write!(f, "'{given}' is not a whole number of {}", kind.units().first().map_or("units", |u| u.0)),
            ValueError::OutOfRange { kind, value } => kind.out_of_range(f, *value),
        }
    }
}

impl std::error::Error for ValueError {}

/// The value in the constant's base unit (a JSON number, or a boolean for a flag).
pub fn parse(kind: Kind, v: &Value) -> Result<Value, ValueError> {
    let wrong = || ValueError::Type { kind, got: v.clone() };
    if kind == Kind::Flag {
        return v.as_bool().map(Value::Bool).ok_or_else(wrong);
    }
    let n = match v {
        Value::Number(x) => x.as_u64().ok_or_else(wrong)?,
        Value::String(s) => with_unit(kind, s)?,
        _ => return Err(wrong()),
    };
    kind.check(n)?;
    Ok(Value::from(n))
}

fn with_unit(kind: Kind, given: &str) -> Result<u64, ValueError> {
    let s = given.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = (s[..split].trim(), s[split..].trim());
    let x: f64 = num.parse().map_err(|_| ValueError::NotANumber { kind, given: given.to_string() })?;
    let scale = match kind.units().iter().find(|u| u.0 == unit) {
        Some(u) => u.1,
        None if unit.is_empty() => 1.0,
        None => return Err(ValueError::Unit { kind, unit: unit.to_string() }),
    };
    let base = x * scale;
    if base.fract() != 0.0 || base < 0.0 || base > u64::MAX as f64 {
        return Err(ValueError::NotWhole { kind, given: s.to_string() });
    }
    Ok(base as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn units_convert_to_the_base_unit() {
        assert_eq!(parse(Kind::Picoseconds, &json!("350 ns")), Ok(json!(350_000)));
        assert_eq!(parse(Kind::Picoseconds, &json!("0.5 us")), Ok(json!(500_000)));
        assert_eq!(parse(Kind::SizeField, &json!("1 KiB")), Ok(json!(1024)));
        assert_eq!(parse(Kind::SizeField, &json!(128)), Ok(json!(128)));
        assert_eq!(parse(Kind::Flag, &json!(false)), Ok(json!(false)));
    }

    #[test]
    fn wrong_units_types_and_bounds_are_refused() {
        let unit = parse(Kind::SizeField, &json!("128 ns")).unwrap_err();
        assert_eq!(unit, ValueError::Unit { kind: Kind::SizeField, unit: "ns".into() });
        assert!(unit.to_string().starts_with("unit 'ns' does not fit: a whole number of B"), "{unit}");
        let range = parse(Kind::SizeField, &json!(100)).unwrap_err();
        assert_eq!(range, ValueError::OutOfRange { kind: Kind::SizeField, value: 100 });
        assert!(range.to_string().contains("§7.5.3.4"), "{range}");
        assert!(parse(Kind::SizeField, &json!(8192)).is_err());
        assert_eq!(parse(Kind::Picoseconds, &json!(-1)), Err(ValueError::Type { kind: Kind::Picoseconds, got: json!(-1) }));
        let half = parse(Kind::Picoseconds, &json!(" 0.5 ps")).unwrap_err();
        assert_eq!(half, ValueError::NotWhole { kind: Kind::Picoseconds, given: "0.5 ps".into() });
        assert_eq!(half.to_string(), "'0.5 ps' is not a whole number of ps");
        assert_eq!(parse(Kind::Picoseconds, &json!("fast")), Err(ValueError::NotANumber { kind: Kind::Picoseconds, given: "fast".into() }));
        assert_eq!(parse(Kind::Tags, &json!(0)), Err(ValueError::OutOfRange { kind: Kind::Tags, value: 0 }));
        assert_eq!(parse(Kind::Tags, &json!("32 B")), Err(ValueError::Unit { kind: Kind::Tags, unit: "B".into() }));
        let flag = parse(Kind::Flag, &json!(1)).unwrap_err();
        assert_eq!(flag.to_string(), "expected true or false, got 1");
        assert!(parse(Kind::Completion, &json!(96)).unwrap_err().to_string().contains("§2.3.1.1"));
        assert_eq!(parse(Kind::Completion, &json!(256)), Ok(json!(256)));
        assert!(parse(Kind::Percent, &json!(101)).unwrap_err().to_string().contains("§3.5.3.1"));
        assert_eq!(parse(Kind::Percent, &json!(50)), Ok(json!(50)));
    }

    #[test]
    fn links_drives_and_budgets_take_their_own_units_and_bounds() {
        assert_eq!(Kind::of("gen"), Kind::Gen);
        assert_eq!(parse(Kind::Gen, &json!(4)), Ok(json!(4)));
        assert!(parse(Kind::Gen, &json!(6)).unwrap_err().to_string().starts_with("Gen6"));
        assert_eq!(parse(Kind::Width, &json!(12)), Ok(json!(12)));
        assert_eq!(parse(Kind::Width, &json!(3)), Err(ValueError::OutOfRange { kind: Kind::Width, value: 3 }));
        assert_eq!(parse(Kind::Bytes, &json!("1 GiB")), Ok(json!(1u64 << 30)));
        assert_eq!(parse(Kind::Bytes, &json!("280 GB")), Ok(json!(280_000_000_000u64)));
        assert!(parse(Kind::of("memory_bytes"), &json!(100)).is_err());
        assert_eq!(parse(Kind::Rate, &json!("2.5 GB/s")), Ok(json!(2_500_000_000u64)));
        assert_eq!(parse(Kind::Count, &json!(0)), Err(ValueError::OutOfRange { kind: Kind::Count, value: 0 }));
        // a device kind's own setting names its unit ([device_kind.KIND] settings)
        assert_eq!(
            ["ps", "bytes", "bytes/s", "commands", "lanes"].map(Kind::of_unit),
            [Some(Kind::Picoseconds), Some(Kind::Bytes), Some(Kind::Rate), Some(Kind::Count), None]
        );
        assert_eq!(parse(Kind::of("interrupt_remapping"), &json!(false)), Ok(json!(false)));
    }
}
