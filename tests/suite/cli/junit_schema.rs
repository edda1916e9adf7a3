//! A JUnit report checked against the JUnit schema of Jenkins' xunit plugin
//! (`tests/fixtures/junit/junit-10.xsd`, MIT, the schema pytest's own tests use), by reading
//! that schema file itself, so `cargo test` needs nothing outside cargo.
//!
//! This is an interpreter of the part of XML Schema that file uses, not a general XSD
//! validator: global `xs:element` declarations, named and anonymous `xs:complexType`s (with
//! `mixed`), `xs:sequence` and `xs:choice` with `minOccurs`/`maxOccurs`, element `ref`s,
//! `xs:attribute` with `use="required"`, and `xs:simpleType` restrictions of `xs:string` by
//! `xs:pattern`. Any other schema construct is refused with a panic naming it, so a schema
//! that grows a rule this reader does not know cannot pass unchecked. The tests at the bottom
//! feed it reports that break each rule, so the check cannot quietly accept everything.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::manifest_path;

/// A content particle: an element reference, a sequence or a choice, with its occurrence
/// bounds (`max: None` is unbounded).
#[derive(Debug, Clone)]
enum Particle {
    Element { name: String, min: usize, max: Option<usize> },
    Sequence { items: Vec<Particle>, min: usize, max: Option<usize> },
    Choice { items: Vec<Particle>, min: usize, max: Option<usize> },
}

/// What an element may hold.
#[derive(Debug, Clone)]
enum Content {
    /// Text only, no attributes or children (`type="xs:string"`).
    Text,
    /// Attributes and child elements; text only when `mixed`.
    Complex { mixed: bool, particle: Option<Particle>, attributes: BTreeMap<String, Attribute> },
}

#[derive(Debug, Clone)]
struct Attribute {
    required: bool,
    /// The `xs:pattern` of its simple type, if it has one (anchored, as XSD patterns are).
    pattern: Option<regex::Regex>,
}

/// The JUnit schema, read from the XSD file.
pub struct Schema {
    elements: BTreeMap<String, Content>,
    /// Elements declared inside a content model, text only; never a document's root.
    local: BTreeSet<String>,
}

const XS: &str = "http://www.w3.org/2001/XMLSchema";

fn occurs(node: roxmltree::Node, name: &str, default: usize) -> Option<usize> {
    match node.attribute(name) {
        None => Some(default),
        Some("unbounded") => None,
        Some(n) => Some(n.parse().unwrap_or_else(|_| panic!("{name}=\"{n}\" is not a count"))),
    }
}

fn xs_children<'a>(node: roxmltree::Node<'a, 'a>) -> impl Iterator<Item = roxmltree::Node<'a, 'a>> {
    node.children()
        .filter(|n| n.is_element())
        .inspect(|n| assert_eq!(n.tag_name().namespace(), Some(XS), "not an XML Schema element: {:?}", n.tag_name()))
}

impl Schema {
    /// Reads `tests/fixtures/junit/junit-10.xsd`.
    pub fn junit() -> Schema {
        let text = std::fs::read_to_string(manifest_path("tests/fixtures/junit/junit-10.xsd")).unwrap();
        Schema::parse(&text)
    }

    fn parse(text: &str) -> Schema {
        let doc = roxmltree::Document::parse(text).expect("the schema is XML");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "schema");
        let mut simple = BTreeMap::new();
        let mut complex = BTreeMap::new();
        for node in xs_children(root) {
            let name = node.attribute("name").unwrap_or_default().to_string();
            match node.tag_name().name() {
                "simpleType" => {
                    simple.insert(name, simple_type(node));
                }
                "complexType" => {
                    complex.insert(name, node);
                }
                "element" => {}
                other => panic!("the schema reader does not know xs:{other}"),
            }
        }
        let mut elements = BTreeMap::new();
        let mut local = BTreeSet::new();
        for node in xs_children(root).filter(|n| n.tag_name().name() == "element") {
            let name = node.attribute("name").expect("a global element has a name").to_string();
            let content = match (node.attribute("type"), xs_children(node).next()) {
                (Some("xs:string"), None) => Content::Text,
                (Some(named), None) => {
                    complex_type(*complex.get(named).unwrap_or_else(|| panic!("no type {named}")), &simple, &mut local)
                }
                (None, Some(inner)) if inner.tag_name().name() == "complexType" => {
                    complex_type(inner, &simple, &mut local)
                }
                other => panic!("the schema reader does not know element {name}'s type {other:?}"),
            };
            elements.insert(name, content);
        }
        Schema { elements, local }
    }

    /// Checks `xml`; the first broken rule, with the element's path, as the error.
    pub fn check(&self, xml: &str) -> Result<(), String> {
        let doc = roxmltree::Document::parse(xml).map_err(|e| format!("not well-formed XML: {e}"))?;
        let root = doc.root_element();
        if !self.elements.contains_key(root.tag_name().name()) {
            return Err(format!("<{}> is not an element of the schema", root.tag_name().name()));
        }
        self.element(root, root.tag_name().name())
    }

    fn element(&self, node: roxmltree::Node, path: &str) -> Result<(), String> {
        let name = node.tag_name().name();
        if node.tag_name().namespace().is_some() {
            return Err(format!("{path}: <{name}> has a namespace the schema does not declare"));
        }
        let content = match self.elements.get(name) {
            Some(content) => content,
            None if self.local.contains(name) => &Content::Text,
            None => return Err(format!("{path}: <{name}> is not in the schema")),
        };
        let children: Vec<_> = node.children().filter(|n| n.is_element()).collect();
        let text_present = node.children().any(|n| n.is_text() && !n.text().unwrap_or("").trim().is_empty());
        match content {
            Content::Text => {
                if let Some(attribute) = node.attributes().next() {
                    return Err(format!("{path}: <{name}> holds text only, not attribute {}", attribute.name()));
                }
                if let Some(child) = children.first() {
                    return Err(format!("{path}: <{name}> holds text only, not <{}>", child.tag_name().name()));
                }
                Ok(())
            }
            Content::Complex { mixed, particle, attributes } => {
                for attribute in node.attributes() {
                    let declared = attributes
                        .get(attribute.name())
                        .ok_or_else(|| format!("{path}: <{name}> has no attribute {}", attribute.name()))?;
                    if let Some(pattern) = &declared.pattern
                        && !pattern.is_match(attribute.value())
                    {
                        return Err(format!(
                            "{path}: {}=\"{}\" does not match the pattern {}",
                            attribute.name(),
                            attribute.value(),
                            pattern.as_str()
                        ));
                    }
                }
                for (attribute, declared) in attributes {
                    if declared.required && node.attribute(attribute.as_str()).is_none() {
                        return Err(format!("{path}: <{name}> needs attribute {attribute}"));
                    }
                }
                if text_present && !mixed {
                    return Err(format!("{path}: <{name}> may not hold text"));
                }
                let names: Vec<&str> = children.iter().map(|c| c.tag_name().name()).collect();
                let fits = match particle {
                    None => names.is_empty(),
                    Some(particle) => ends(particle, &names, 0).contains(&names.len()),
                };
                if !fits {
                    return Err(format!("{path}: <{name}> may not hold these children in this order: {names:?}"));
                }
                for (i, child) in children.iter().enumerate() {
                    self.element(*child, &format!("{path}/{}[{i}]", child.tag_name().name()))?;
                }
                Ok(())
            }
        }
    }
}

fn simple_type(node: roxmltree::Node) -> regex::Regex {
    let restriction = xs_children(node).next().expect("a restriction");
    assert_eq!(restriction.tag_name().name(), "restriction");
    assert_eq!(restriction.attribute("base"), Some("xs:string"), "only restrictions of xs:string");
    let facets: Vec<_> = xs_children(restriction).collect();
    assert!(
        facets.len() == 1 && facets[0].tag_name().name() == "pattern",
        "the schema reader knows only one xs:pattern facet"
    );
    let pattern = facets[0].attribute("value").expect("a pattern value");
    regex::Regex::new(&format!("^(?:{pattern})$")).expect("the pattern is a regular expression")
}

fn complex_type(
    node: roxmltree::Node,
    simple: &BTreeMap<String, regex::Regex>,
    local: &mut BTreeSet<String>,
) -> Content {
    let mixed = node.attribute("mixed") == Some("true");
    let mut particle = None;
    let mut attributes = BTreeMap::new();
    for child in xs_children(node) {
        match child.tag_name().name() {
            "sequence" | "choice" => {
                assert!(particle.is_none(), "one content model per type");
                particle = Some(group(child, local));
            }
            "attribute" => {
                let name = child.attribute("name").expect("an attribute has a name").to_string();
                let pattern = match child.attribute("type") {
                    None | Some("xs:string") => None,
                    Some(named) => Some(simple.get(named).unwrap_or_else(|| panic!("no simple type {named}")).clone()),
                };
                let required = match child.attribute("use") {
                    None | Some("optional") => false,
                    Some("required") => true,
                    Some(other) => panic!("the schema reader does not know use=\"{other}\""),
                };
                attributes.insert(name, Attribute { required, pattern });
            }
            other => panic!("the schema reader does not know xs:{other} in a complex type"),
        }
    }
    Content::Complex { mixed, particle, attributes }
}

fn group(node: roxmltree::Node, local: &mut BTreeSet<String>) -> Particle {
    let min = occurs(node, "minOccurs", 1).expect("minOccurs is a count");
    let max = occurs(node, "maxOccurs", 1);
    match node.tag_name().name() {
        "element" => match (node.attribute("ref"), node.attribute("name"), node.attribute("type")) {
            (Some(name), None, None) => Particle::Element { name: name.to_string(), min, max },
            // A local declaration (the rerun type's `stackTrace`): text only, as the global
            // elements of that name are.
            (None, Some(name), Some("xs:string")) => {
                local.insert(name.to_string());
                Particle::Element { name: name.to_string(), min, max }
            }
            other => panic!("the schema reader does not know a content element {other:?}"),
        },
        "sequence" => Particle::Sequence { items: xs_children(node).map(|n| group(n, local)).collect(), min, max },
        "choice" => Particle::Choice { items: xs_children(node).map(|n| group(n, local)).collect(), min, max },
        other => panic!("the schema reader does not know xs:{other} in a content model"),
    }
}

/// Every position in `names` at which `particle` can end when it starts at `from`: a set
/// of positions rather than one, so a choice or an optional item never needs backtracking.
fn ends(particle: &Particle, names: &[&str], from: usize) -> Vec<usize> {
    let (min, max) = match particle {
        Particle::Element { min, max, .. }
        | Particle::Sequence { min, max, .. }
        | Particle::Choice { min, max, .. } => (*min, *max),
    };
    let once = |start: usize| -> Vec<usize> {
        match particle {
            Particle::Element { name, .. } => {
                if names.get(start) == Some(&name.as_str()) {
                    vec![start + 1]
                } else {
                    Vec::new()
                }
            }
            Particle::Sequence { items, .. } => items.iter().fold(vec![start], |at, item| {
                let mut next: Vec<usize> = at.iter().flat_map(|&p| ends(item, names, p)).collect();
                next.sort_unstable();
                next.dedup();
                next
            }),
            Particle::Choice { items, .. } => items.iter().flat_map(|item| ends(item, names, start)).collect(),
        }
    };
    let step = |at: &BTreeSet<usize>| -> BTreeSet<usize> { at.iter().flat_map(|&p| once(p)).collect() };
    let mut at = BTreeSet::from([from]);
    for _ in 0..min {
        at = step(&at);
    }
    let mut reached = at.clone();
    let mut count = min;
    // Past the minimum, a position already reached needs no second visit: reaching it with
    // fewer occurrences leaves at least as many still allowed. This also ends an unbounded
    // particle that can match nothing.
    while !at.is_empty() && max.is_none_or(|max| count < max) {
        count += 1;
        at = step(&at).into_iter().filter(|p| !reached.contains(p)).collect();
        reached.extend(at.iter().copied());
    }
    reached.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::Schema;

    const GOOD: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="rehearsal" tests="2" failures="1" errors="0" time="0.250">
  <testsuite name="rehearsal" tests="2" failures="1" errors="0" time="1,234.5">
    <testcase name="a" classname="scenarios.roku.a" time="0.100"/>
    <testcase name="b" classname="scenarios.roku.b" time="0.150">
      <failure message="it failed" type="rehearsal.expectation">details</failure>
      <system-out>trace</system-out>
    </testcase>
  </testsuite>
</testsuites>"#;

    #[test]
    fn a_report_that_keeps_the_schema_s_rules_passes() {
        Schema::junit().check(GOOD).unwrap();
    }

    /// One rule broken at a time, each refused with the reason.
    #[test]
    fn a_report_that_breaks_a_rule_of_the_schema_is_refused() {
        let schema = Schema::junit();
        let broken = [
            (GOOD.replace("<testcase name=\"a\" ", "<testcase "), "needs attribute name"),
            (
                GOOD.replace("tests=\"2\" failures=\"1\" errors=\"0\" time=\"1", "tests=\"2\" failures=\"1\" time=\"1"),
                "needs attribute errors",
            ),
            (GOOD.replace("time=\"1,234.5\"", "time=\"1.5s\""), "does not match the pattern"),
            (
                GOOD.replace(" classname=\"scenarios.roku.a\"", " disabled=\"0\" classname=\"scenarios.roku.a\""),
                "has no attribute disabled",
            ),
            (
                GOOD.replace("<system-out>trace</system-out>", "<stdout>trace</stdout>"),
                "children in this order: [\"failure\", \"stdout\"]",
            ),
            (GOOD.replace("<system-out>trace</system-out>", "<system-out><b/></system-out>"), "holds text only"),
            (GOOD.replace("</testsuite>", "stray words</testsuite>"), "may not hold text"),
            (
                GOOD.replace("<testsuites ", "<suites ").replace("</testsuites>", "</suites>"),
                "not an element of the schema",
            ),
            // testsuites holds testsuite elements only.
            (
                GOOD.replace("  </testsuite>\n</testsuites>", "  </testsuite>\n<testcase name=\"c\"/></testsuites>"),
                "may not hold these children",
            ),
            (GOOD.replace("</testsuites>", ""), "not well-formed"),
        ];
        for (xml, reason) in broken {
            assert_ne!(xml, GOOD, "the breakage applies: {reason}");
            let said = schema.check(&xml).expect_err(reason);
            assert!(said.contains(reason), "expected {reason:?}, got {said:?}");
        }
    }

    /// The occurrence rules of a sequence: the rerun type's children come in order, each at
    /// most once.
    #[test]
    fn the_order_and_count_of_a_sequence_are_checked() {
        let schema = Schema::junit();
        let case = |inner: &str| {
            format!(
                "<testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\"><testcase name=\"c\"><flakyFailure type=\"t\">{inner}</flakyFailure></testcase></testsuite>"
            )
        };
        schema.check(&case("<stackTrace>x</stackTrace><system-out>o</system-out>")).unwrap();
        schema.check(&case("")).unwrap();
        assert!(schema.check(&case("<system-out>o</system-out><stackTrace>x</stackTrace>")).is_err());
        assert!(schema.check(&case("<stackTrace>x</stackTrace><stackTrace>y</stackTrace>")).is_err());
    }
}
