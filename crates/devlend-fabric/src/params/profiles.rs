//! Device profiles and kind tables added while the program runs ([`register_profiles`]), and the
//! one check every profile passes, compiled in or added ([`validate`]): a new device type's
//! `[device.NAME]` and `[device_kind.KIND]` tables given as TOML text (a test's own type, whose
//! profile cannot be in params/hardware.toml) are taken exactly as the compiled-in ones are, and
//! refused with the same [`ProfileError`]: the field (`device.NAME.class_code`) and its line in
//! the text that wrote it.
//!
//! What is checked: the TOML and each table's fields (as [`super::Params`] reads them), a
//! profile's `source`, one class code per kind, a kind table's profiles (at least one, each of its
//! `import_classes`, each with every setting of the kind that has no default), its settings'
//! units, and its `default_profile` (a profile of the kind) and `unprofiled` text.
//!
//! How they are kept: [`super::params`] returns the compiled-in parameters until something is
//! registered, then the parameters with every registered table merged in. Each registration that
//! adds tables builds that merged set once and keeps it for the rest of the process (a reference
//! [`super::params`] handed out stays valid), so registering is for a few types, not per run. A
//! name that exists already (compiled in, or registered with other text) is refused; the same
//! text registered again is a no-op, so every test may register its types.

use super::{DeviceKindProfile, DeviceProfile, Params, HARDWARE_TOML};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{OnceLock, RwLock};

/// A table of a parameter text that cannot be taken: the field, where it is written, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileError {
    /// The table and key as TOML writes them (`device.ramdisk-1m.class_code`,
    /// `device_kind.ramdisk`); empty for TOML that does not parse.
    pub field: String,
    /// The line (1-based) of the text that writes the field (its table's header where the key is
    /// missing); 0 where no line does.
    pub line: usize,
    pub problem: ProfileProblem,
}

/// Why a table is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileProblem {
    /// Not TOML, a table other than `device` and `device_kind` in a registered text, or a field of
    /// the wrong shape (the TOML parser's error).
    Toml(Box<toml::de::Error>),
    /// A profile or kind table of that name exists (compiled in, or registered with other text).
    Exists,
    /// A profile without its `source`.
    NoSource,
    /// A profile's class code is not that of the kind's first profile (one class code per kind).
    ClassCode { kind: String, expected: u32, got: u32 },
    /// A kind table for a kind that no profile has.
    NoProfileOfKind,
    /// A profile's class code is none of its kind's `import_classes`.
    NotImported { kind: String, class_code: u32 },
    /// A profile lacks a setting of its kind's that has no default.
    MissingSetting { kind: String, key: String },
    /// A kind's setting with a unit other than ps, bytes, bytes/s or commands.
    Unit { unit: String },
    /// A kind's `default_profile` that is not a profile of the kind.
    DefaultProfile { profile: String },
    /// A kind's `unprofiled` text with a placeholder other than `{device}`, or `{default_profile}`
    /// where the kind has one.
    Placeholder { text: String },
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: ", self.line)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        match &self.problem {
            ProfileProblem::Toml(e) => write!(f, "{}", e.message()),
            ProfileProblem::Exists => write!(f, "a table of this name exists (compiled in, or registered with other text)"),
            ProfileProblem::NoSource => write!(f, "a profile names its source"),
            ProfileProblem::ClassCode { kind, expected, got } => write!(f, "class code {got:06x}: kind {kind} has class code {expected:06x} (one per kind)"),
            ProfileProblem::NoProfileOfKind => write!(f, "no profile is of this kind"),
            ProfileProblem::NotImported { kind, class_code } => write!(f, "class code {class_code:06x} is not one of kind {kind}'s import_classes"),
            ProfileProblem::MissingSetting { kind, key } => write!(f, "lacks {key}, a setting of kind {kind} without a default"),
            ProfileProblem::Unit { unit } => write!(f, "unit '{unit}' is not ps, bytes, bytes/s or commands"),
            ProfileProblem::DefaultProfile { profile } => write!(f, "'{profile}' is not a profile of this kind"),
            ProfileProblem::Placeholder { text } => write!(f, "'{text}': the placeholders are {{device}} and, with a default_profile, {{default_profile}}"),
        }
    }
}

impl std::error::Error for ProfileError {}

/// What a registered text may hold: profiles and kind tables, nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Extra {
    #[serde(default)]
    device: BTreeMap<String, DeviceProfile>,
    #[serde(default)]
    device_kind: BTreeMap<String, DeviceKindProfile>,
}

/// The parameter texts in order (params/hardware.toml first, then each registered one).
struct Texts<'a> {
    texts: Vec<&'a str>,
    /// Which text wrote each profile and each kind table.
    device: BTreeMap<String, usize>,
    kind: BTreeMap<String, usize>,
}

impl Texts<'_> {
    /// An error about `key` (or the whole table without one) of table `table` (`device.NAME`).
    fn error(&self, (section, name): (&str, &str), key: Option<&str>, problem: ProfileProblem) -> ProfileError {
        let at = if section == "device" { &self.device } else { &self.kind };
        let text = at.get(name).map_or("", |&i| self.texts[i]);
        let table = format!("{section}.{name}");
        let line = line_of(text, &table, key);
        ProfileError { field: key.map_or(table.clone(), |k| format!("{table}.{k}")), line, problem }
    }
}

/// The line of `[table]`'s `key` in `text` (the header's without a key or where the table does
/// not write it; 0 where no header is `[table]`).
fn line_of(text: &str, table: &str, key: Option<&str>) -> usize {
    let header = format!("[{table}]");
    let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
    let Some(h) = lines.iter().position(|l| l.starts_with(&header)) else { return 0 };
    let written = |l: &&str| key.is_some_and(|k| l.strip_prefix(k).is_some_and(|r| r.trim_start().starts_with('=')));
    let mut body = lines[h + 1..].iter().take_while(|l| !l.starts_with('['));
    h + 1 + body.position(written).map_or(0, |i| i + 1)
}

fn toml_error(text: &str, e: toml::de::Error) -> ProfileError {
    let line = e.span().map_or(0, |s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    ProfileError { field: String::new(), line, problem: ProfileProblem::Toml(Box::new(e)) }
}

/// The parameters of `texts[0]` (a whole parameter file) with the profiles and kind tables of
/// each later text merged in, if every table passes the checks (module docs).
pub fn validate(texts: &[&str]) -> Result<Params, ProfileError> {
    let (first, rest) = texts.split_first().expect("at least the parameter file");
    let mut p: Params = toml::from_str(first).map_err(|e| toml_error(first, e))?;
    let mut t = Texts { texts: texts.to_vec(), device: BTreeMap::new(), kind: BTreeMap::new() };
    t.device.extend(p.device.keys().map(|k| (k.clone(), 0)));
    t.kind.extend(p.device_kind.keys().map(|k| (k.clone(), 0)));
    for (i, text) in rest.iter().enumerate().map(|(i, x)| (i + 1, x)) {
        let extra: Extra = toml::from_str(text).map_err(|e| toml_error(text, e))?;
        for (name, d) in extra.device {
            if p.device.contains_key(&name) {
                let line = line_of(text, &format!("device.{name}"), None);
                return Err(ProfileError { field: format!("device.{name}"), line, problem: ProfileProblem::Exists });
            }
            t.device.insert(name.clone(), i);
            p.device.insert(name, d);
        }
        for (name, k) in extra.device_kind {
            if p.device_kind.contains_key(&name) {
                let line = line_of(text, &format!("device_kind.{name}"), None);
                return Err(ProfileError { field: format!("device_kind.{name}"), line, problem: ProfileProblem::Exists });
            }
            t.kind.insert(name.clone(), i);
            p.device_kind.insert(name, k);
        }
    }
    check_profiles(&p, &t)?;
    for (kind, k) in &p.device_kind {
        check_kind(&p, &t, kind, k)?;
    }
    Ok(p)
}

/// Each profile names its source, and a kind's profiles share the class code of its first
/// (in the order the texts give them).
fn check_profiles(p: &Params, t: &Texts) -> Result<(), ProfileError> {
    let mut order: Vec<(&usize, &String)> = t.device.iter().map(|(n, i)| (i, n)).collect();
    order.sort();
    let mut first: BTreeMap<&str, u32> = BTreeMap::new();
    for (_, name) in order {
        let d = &p.device[name];
        if d.source.is_empty() {
            return Err(t.error(("device", name), Some("source"), ProfileProblem::NoSource));
        }
        let expected = *first.entry(d.kind.as_str()).or_insert(d.class_code);
        if d.class_code != expected {
            let problem = ProfileProblem::ClassCode { kind: d.kind.clone(), expected, got: d.class_code };
            return Err(t.error(("device", name), Some("class_code"), problem));
        }
    }
    Ok(())
}

/// A kind table: its profiles exist, are imported by its classes and state its settings; its
/// units, default profile and `unprofiled` text.
fn check_kind(p: &Params, t: &Texts, kind: &str, k: &DeviceKindProfile) -> Result<(), ProfileError> {
    let at = ("device_kind", kind);
    let profiles: Vec<(&String, &DeviceProfile)> = p.device.iter().filter(|(_, d)| d.kind == kind).collect();
    if profiles.is_empty() {
        return Err(t.error(at, None, ProfileProblem::NoProfileOfKind));
    }
    for (name, d) in &profiles {
        let code = format!("{:06x}", d.class_code);
        if !k.import_classes.iter().any(|c| code.starts_with(c.as_str())) {
            return Err(t.error(("device", name), Some("class_code"), ProfileProblem::NotImported { kind: kind.into(), class_code: d.class_code }));
        }
        if let Some(s) = k.settings.iter().find(|s| s.default.is_none() && !d.constants.contains_key(&s.key)) {
            return Err(t.error(("device", name), None, ProfileProblem::MissingSetting { kind: kind.into(), key: s.key.clone() }));
        }
    }
    if let Some(s) = k.settings.iter().find(|s| !crate::tuning::unit_is_known(&s.unit)) {
        return Err(t.error(at, Some("settings"), ProfileProblem::Unit { unit: s.unit.clone() }));
    }
    if let Some(dp) = k.default_profile.as_ref().filter(|dp| !profiles.iter().any(|(n, _)| n == dp)) {
        return Err(t.error(at, Some("default_profile"), ProfileProblem::DefaultProfile { profile: dp.clone() }));
    }
    let allowed: &[&str] = if k.default_profile.is_some() { &["device", "default_profile"] } else { &["device"] };
    if let Some(text) = k.unprofiled.as_ref().filter(|x| !placeholders_in(x, allowed)) {
        return Err(t.error(at, Some("unprofiled"), ProfileProblem::Placeholder { text: text.clone() }));
    }
    Ok(())
}

/// Whether every `{...}` of `text` is one of `allowed`.
fn placeholders_in(text: &str, allowed: &[&str]) -> bool {
    text.split('{').skip(1).all(|s| s.split_once('}').is_some_and(|(name, _)| allowed.contains(&name)))
}

/// The registered texts, and the parameters with them merged in (`None`: nothing registered).
struct Registered {
    texts: Vec<String>,
    params: Option<&'static Params>,
}

static REGISTERED: RwLock<Registered> = RwLock::new(Registered { texts: Vec::new(), params: None });
/// Whether anything is registered: until then [`current`] takes no lock.
static ANY: AtomicBool = AtomicBool::new(false);

/// The compiled-in parameters, checked as every registered text is.
fn compiled() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| validate(&[HARDWARE_TOML]).unwrap_or_else(|e| panic!("params/hardware.toml: {e}")))
}

/// The parameters in force: the compiled-in ones with every registered text merged in.
pub(super) fn current() -> &'static Params {
    if !ANY.load(Ordering::Acquire) {
        return compiled();
    }
    REGISTERED.read().unwrap_or_else(|e| e.into_inner()).params.unwrap_or_else(compiled)
}

/// Add the profiles (`[device.NAME]`) and kind tables (`[device_kind.KIND]`) of TOML text
/// `toml` to the parameters every fabric built from now on takes, checked as the compiled-in
/// ones are; refused as a whole, changing nothing, with the first table that fails. A fabric
/// then takes the new profiles by name and their kinds by name, and a kind's own settings in its
/// table's units (module docs).
pub fn register_profiles(toml: &str) -> Result<(), ProfileError> {
    let mut r = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    if r.texts.iter().any(|x| x == toml) {
        return Ok(());
    }
    let texts: Vec<&str> = [HARDWARE_TOML].into_iter().chain(r.texts.iter().map(String::as_str)).chain([toml]).collect();
    let merged = validate(&texts)?;
    r.params = Some(Box::leak(Box::new(merged)));
    r.texts.push(toml.to_string());
    ANY.store(true, Ordering::Release);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{register_profiles, validate, ProfileProblem, HARDWARE_TOML};

    /// A profile of a kind of its own and the kind's table, as a test's device type writes them.
    const DISK: &str = r#"
[device.fabric-test-disk]
kind = "fabric-test-disk"
class_code = 0x018000
vendor = 0x1af4
device = 0x10f0
max_gen = 3
max_width = 4
bars = [ { index = 0, size = 0x1000, bits = 64, pref = false } ]
msix_vectors = 0
block_bytes = 4096
source = "devlend-fabric params/profiles.rs tests"

[device_kind.fabric-test-disk]
import_classes = ["0180"]
settings = [ { key = "block_bytes", unit = "bytes" }, { key = "capacity_bytes", unit = "bytes", default = "1 MiB" } ]
default_profile = "fabric-test-disk"
unprofiled = "the profile {default_profile}'s blocks (set devices.{device}.block_bytes)"
source = "devlend-fabric params/profiles.rs tests"
"#;

    /// `DISK` with `from` replaced by `to`, checked after the parameter file: the error's field,
    /// line and problem.
    fn refused(from: &str, to: &str) -> (String, usize, ProfileProblem) {
        let text = DISK.replacen(from, to, 1);
        assert_ne!(text, DISK, "{from} is in the text");
        let e = validate(&[HARDWARE_TOML, &text]).err().unwrap_or_else(|| panic!("taken: {to}"));
        assert!(e.to_string().starts_with(&format!("line {}: ", e.line)), "{e}");
        (e.field, e.line, e.problem)
    }

    #[test]
    fn a_new_kinds_profile_and_table_are_taken_beside_the_files() {
        let p = validate(&[HARDWARE_TOML, DISK]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.device["fabric-test-disk"].kind, "fabric-test-disk");
        assert_eq!(p.device_kind["fabric-test-disk"].default_profile.as_deref(), Some("fabric-test-disk"));
        assert!(p.device.contains_key("optane-900p") && p.device_kind.contains_key("nvme"));
    }

    /// Each check refuses with the field and the line of the text that writes it.
    #[test]
    fn each_check_names_the_field_and_its_line() {
        use ProfileProblem::*;
        let (d, k) = ("device.fabric-test-disk", "device_kind.fabric-test-disk");
        assert_eq!(refused(r#"source = "devlend-fabric params/profiles.rs tests""#, r#"source = """#), (format!("{d}.source"), 12, NoSource));
        let (f, line, p) = refused("class_code = 0x018000", "class_code = 0x010802\nkind = \"nvme\"");
        assert_eq!((f.as_str(), line), ("", 5), "a key given twice is TOML's error, at its line");
        assert!(matches!(p, Toml(_)));
        let code = refused(r#"kind = "fabric-test-disk""#, r#"kind = "nvme""#);
        assert_eq!(code, (format!("{d}.class_code"), 4, ClassCode { kind: "nvme".into(), expected: 0x010802, got: 0x018000 }));
        assert_eq!(
            refused(r#"import_classes = ["0180"]"#, r#"import_classes = ["0108"]"#).2,
            NotImported { kind: "fabric-test-disk".into(), class_code: 0x018000 }
        );
        assert_eq!(refused("block_bytes = 4096\n", ""), (d.to_string(), 2, MissingSetting { kind: "fabric-test-disk".into(), key: "block_bytes".into() }));
        assert_eq!(refused(r#"unit = "bytes" },"#, r#"unit = "blocks" },"#), (format!("{k}.settings"), 16, Unit { unit: "blocks".into() }));
        assert_eq!(
            refused(r#"default_profile = "fabric-test-disk""#, r#"default_profile = "optane-900p""#).2,
            DefaultProfile { profile: "optane-900p".into() }
        );
        assert_eq!(refused("{device}.block", "{name}.block").0, format!("{k}.unprofiled"));
        assert_eq!(refused("[device.fabric-test-disk]", "[device.optane-900p]"), ("device.optane-900p".into(), 2, Exists));
        assert_eq!(refused("[device_kind.fabric-test-disk]", "[device_kind.nvme]"), ("device_kind.nvme".into(), 14, Exists));
        let orphan = DISK.replace("[device_kind.fabric-test-disk]", "[device_kind.fabric-test-tape]");
        let e = validate(&[HARDWARE_TOML, &orphan]).unwrap_err();
        assert_eq!((e.field.as_str(), e.line, e.problem), ("device_kind.fabric-test-tape", 14, NoProfileOfKind));
        let (f, line, p) = refused("[device.fabric-test-disk]", "[cpu.fabric-test-cpu]");
        assert!(f.is_empty() && line > 0 && matches!(p, Toml(_)), "only device and device_kind tables are registered");
    }

    /// Registered, a new kind's profile builds a fabric: its kind, its class code, its kind's own
    /// setting checked in its unit; the same text again is taken, other text of the name refused.
    #[test]
    fn a_registered_profile_and_kind_build_a_fabric() {
        register_profiles(DISK).unwrap_or_else(|e| panic!("{e}"));
        register_profiles(DISK).expect("the same text again");
        let e = register_profiles(&DISK.replace("max_gen = 3", "max_gen = 2")).unwrap_err();
        assert_eq!((e.field.as_str(), e.problem), ("device.fabric-test-disk", ProfileProblem::Exists));
        let topo = |params: &str| {
            crate::build_json(&format!(
                r#"{{"name":"t","hosts":[{{"name":"h","cpu":"intel-xeon-e5","ram":4294967296,"root_ports":2}}],
                  "devices":[{{"name":"d0","profile":"fabric-test-disk"}},{{"name":"d1","kind":"fabric-test-disk","functions":[{{"bars":[{{"index":0,"size":4096}}]}}]}}],
                  "links":[{{"a":"h.rp0","b":"d0","gen":3,"width":4}},{{"a":"h.rp1","b":"d1","gen":3,"width":4}}],
                  "params":{params}}}"#
            ))
        };
        let f = topo(r#"{"devices":{"d0":{"capacity_bytes":"2 MiB"}}}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.devices()[1].kind.as_str(), "fabric-test-disk");
        assert_eq!(f.tuning().own_settings(0).get("capacity_bytes"), Some(&(2 << 20)));
        assert_eq!(f.config_read(f.func_id("d1").unwrap(), 0x08, 4).unwrap() >> 8, 0x018000, "the kind's class code");
        let e = topo(r#"{"devices":{"d0":{"capacity_bytes":"1 hour"}}}"#).err().expect("refused");
        assert_eq!(e.path, "/params/devices/d0/capacity_bytes");
    }
}
