/*
 * core/conversion.h - ChallengeDefinition between its two versions of
 * ctf.kopc.io (docs/crd-versions.md): what the conversion webhook
 * (controller/webhook.c, through kop_webhook_converter) answers and what
 * the unit tests and the fuzz target check. Pure functions on the JSON
 * object: no I/O, no state.
 *
 * The one difference: v1alpha1 has spec.update.maxUnavailable beside
 * spec.update.strategy, v1beta1 nests it as spec.update.rolling.
 * maxUnavailable. Whatever v1beta1's rolling holds that v1alpha1 cannot is
 * kept in the annotation CTF_CONVERSION_ROLLING_ANNOTATION, so that
 * v1beta1 -> v1alpha1 -> v1beta1 gives back the object it started from,
 * and so does v1alpha1 -> v1beta1 -> v1alpha1 for an object without that
 * annotation (one with it came from a conversion, the first case). The
 * annotation is reserved: set by hand on a v1beta1 object it would be
 * taken for a conversion's. Challenge has the same schema in both
 * versions (conversion None in its CRD) and never comes here.
 */
#ifndef CTF_CORE_CONVERSION_H
#define CTF_CORE_CONVERSION_H

#include <jansson.h>
#include <kop/err.h>

#define CTF_VERSION_ALPHA "v1alpha1"
#define CTF_VERSION_BETA  "v1beta1"

/* The annotation holding, as compact JSON, what v1alpha1 cannot of v1beta1's update.rolling. */
#define CTF_CONVERSION_ROLLING_ANNOTATION "ctf.kopc.io/v1beta1-update-rolling"

/* Cap on that annotation's text, far above any real rolling (one field today). */
#define CTF_CONVERSION_ANNOTATION_MAX 4096

/*
 * ctf_convert_definition changes def (a ChallengeDefinition, in place) from
 * version from to version to ("v1alpha1" or "v1beta1"); it does not set
 * apiVersion (the webhook server does). KOP_OK, also when from equals to
 * (nothing changes). KOP_EINVAL with st's message when a version is not
 * one of the two, def is not an object, the object already holds the
 * other version's field (v1alpha1 update.rolling, v1beta1
 * update.maxUnavailable: the apiserver prunes both, so only a hand-made
 * review carries them), something must be kept in the annotation but
 * metadata (or its annotations) is not an object, or it would be longer
 * than CTF_CONVERSION_ANNOTATION_MAX. To v1beta1 never fails otherwise:
 * an annotation that is not JSON stays where it is. KOP_ENOMEM when memory
 * runs out. On an error def may be half converted: convert a copy.
 */
KOP_NODISCARD kop_err ctf_convert_definition(json_t *def, const char *from, const char *to,
                                             kop_status *st);

#endif /* CTF_CORE_CONVERSION_H */
