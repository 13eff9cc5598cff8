//! Parses type constraint expressions (`list(object({a = optional(string, "x")}))`).

use hcl::Expression;

use crate::value::{ObjTy, Ty};

/// Parses a type constraint; the error is a human-readable detail.
pub fn parse_type(e: &Expression) -> Result<Ty, String> {
    match e {
        Expression::Variable(v) => match v.as_str() {
            "string" => Ok(Ty::String),
            "number" => Ok(Ty::Number),
            "bool" => Ok(Ty::Bool),
            "any" => Ok(Ty::Dynamic),
            other => Err(format!("The keyword \"{other}\" is not a valid type specification.")),
        },
        Expression::Parenthesis(inner) => parse_type(inner),
        Expression::FuncCall(f) => {
            let name = f.name.name.as_str();
            let arg = |i: usize| {
                f.args
                    .get(i)
                    .ok_or_else(|| format!("The {name} type constructor requires one argument."))
            };
            match name {
                "list" => Ok(Ty::List(Box::new(parse_type(arg(0)?)?))),
                "set" => Ok(Ty::Set(Box::new(parse_type(arg(0)?)?))),
                "map" => Ok(Ty::Map(Box::new(parse_type(arg(0)?)?))),
                "tuple" => match arg(0)? {
                    Expression::Array(xs) => {
                        Ok(Ty::Tuple(xs.iter().map(parse_type).collect::<Result<_, _>>()?))
                    }
                    _ => Err("The tuple type constructor requires a list of types.".into()),
                },
                "object" => match arg(0)? {
                    Expression::Object(o) => {
                        let mut ot = ObjTy::default();
                        for (k, v) in o {
                            let key = crate::config::object_key(k);
                            let key = if key.is_empty() {
                                match k {
                                    hcl::ObjectKey::Expression(Expression::Variable(var)) => {
                                        var.as_str().to_owned()
                                    }
                                    _ => return Err("Invalid object attribute name.".into()),
                                }
                            } else {
                                key
                            };
                            if let Expression::FuncCall(fc) = v
                                && fc.name.name.as_str() == "optional"
                            {
                                let t = parse_type(fc.args.first().ok_or(
                                    "The optional modifier requires a type argument.",
                                )?)?;
                                if let Some(d) = fc.args.get(1) {
                                    let raw = crate::eval::const_value(d)?;
                                    let dv = crate::value::convert(&raw, &t)?;
                                    ot.defaults.insert(key.clone(), dv);
                                }
                                ot.optional.insert(key.clone());
                                ot.attrs.insert(key, t);
                            } else {
                                ot.attrs.insert(key, parse_type(v)?);
                            }
                        }
                        Ok(Ty::Object(ot))
                    }
                    _ => Err("The object type constructor requires an object of types.".into()),
                },
                other => Err(format!("Keyword \"{other}\" is not a valid type constructor.")),
            }
        }
        _ => Err("A type specification is either a primitive type keyword (bool, number, string) or a complex type constructor call, like list(string).".into()),
    }
}
