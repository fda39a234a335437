/*
 * controller/resources.h - the resources the CTF operator touches
 * (resources.c): the Challenge and ChallengeDefinition, and the kinds of an
 * instance it caches or writes. Part of the declared interface (operator.h).
 */
#ifndef CTF_CONTROLLER_RESOURCES_H
#define CTF_CONTROLLER_RESOURCES_H

#include <kop/client.h>

extern const kop_resource CTF_CHALLENGES;
extern kop_resource CTF_DEFINITIONS; /* version set by ctf_choose_versions */
extern const kop_resource CTF_NAMESPACES;
extern const kop_resource CTF_DEPLOYMENTS;
extern const kop_resource CTF_PODS;
extern const kop_resource CTF_SERVICES;
extern const kop_resource CTF_ENDPOINTSLICES;
extern const kop_resource CTF_NETWORKPOLICIES;
extern const kop_resource CTF_SECRETS;
extern const kop_resource CTF_TLSROUTES;
extern const kop_resource CTF_HTTPROUTES;

#endif /* CTF_CONTROLLER_RESOURCES_H */
