# Tri-state build features: AUTO uses the dependency when present, ON demands it, OFF skips it.
# daqiri_feature(NAME DOC) declares the cache entry DAQIRI_WITH_<NAME>;
# daqiri_feature_resolve(NAME FOUND REASON) sets DAQIRI_HAVE_<NAME> and records the outcome
# for the configure summary and for `daqirid --version`.

function(daqiri_feature name doc)
  set(DAQIRI_WITH_${name} AUTO CACHE STRING "${doc} (AUTO|ON|OFF)")
  set_property(CACHE DAQIRI_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${DAQIRI_WITH_${name}}" value)
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "DAQIRI_WITH_${name}=${DAQIRI_WITH_${name}}: expected AUTO, ON or OFF")
  endif()
  set(DAQIRI_WITH_${name} "${value}" PARENT_SCOPE)
endfunction()

function(daqiri_feature_resolve name found reason)
  if(DAQIRI_WITH_${name} STREQUAL "OFF")
    set(have OFF)
    set(why "disabled (DAQIRI_WITH_${name}=OFF)")
  elseif(found)
    set(have ON)
    set(why "${reason}")
  elseif(DAQIRI_WITH_${name} STREQUAL "ON")
    message(FATAL_ERROR "DAQIRI_WITH_${name}=ON but ${reason}")
  else()
    set(have OFF)
    set(why "left out: ${reason}")
  endif()
  set(DAQIRI_HAVE_${name} ${have} PARENT_SCOPE)
  set(DAQIRI_FEATURE_${name}_REASON "${why}" PARENT_SCOPE)
  message(STATUS "daqiri: ${name}: ${why}")
endfunction()
